package node_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// quotaMessage is OpenAI's answer for a key whose account is out of credit.
const quotaMessage = "You exceeded your current quota, please check your plan and billing details."

// Every connection out of quota (OpenAI's 429 insufficient_quota) is not
// every connection rate limited: the client reads the provider's own
// insufficient_quota answer, and while the connections cool, a 429 that
// says they are out of quota, with the wait, streamed and whole; never a
// rate limit that waiting two seconds would end.
func TestChatEveryConnectionOutOfQuota(t *testing.T) {
	for _, m := range chatModes {
		t.Run(m.name, func(t *testing.T) {
			p := newPair(t)
			p.primary.Enqueue(pathChat, upstreamtest.OpenAIError(429, "insufficient_quota", "insufficient_quota", quotaMessage))
			p.fallback.Enqueue(pathChat, upstreamtest.OpenAIError(429, "insufficient_quota", "insufficient_quota", quotaMessage))

			r := chatAsk(t, p.sb, chatModel, "a", m.stream)
			require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
			assert.Equal(t, "insufficient_quota", errorCode(r.Response), "%s", r.Body)
			assert.Equal(t, quotaMessage, errorMessage(r), "the provider's own words")
			assert.Equal(t, 1, p.primary.Count(pathChat))
			assert.Equal(t, 1, p.fallback.Count(pathChat))

			r = chatAsk(t, p.sb, chatModel, "b", m.stream)
			require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
			assert.Equal(t, "insufficient_quota", errorCode(r.Response), "%s", r.Body)
			assert.Contains(t, errorMessage(r), "out of quota")
			wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
			require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
			assert.GreaterOrEqual(t, wait, 1)
			assert.Equal(t, 1, p.primary.Count(pathChat), "cooling: not asked again")
			assert.Equal(t, 1, p.fallback.Count(pathChat))
		})
	}
}
