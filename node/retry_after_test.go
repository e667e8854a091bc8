package node_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// retryAfter reads a reply's Retry-After in whole seconds.
func retryAfter(t *testing.T, r chatReply) int {
	t.Helper()
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
	return ra
}

// Failover row 14 for a combo: every model's connections are rate limited,
// one model's free in 5 s, the other's in 60 s. The client is told to come
// back at the earliest end, whichever model it is, both when the models
// were just tried and while they are still cooling.
func TestComboRetryAfterIsEarliest(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second string // each model's Retry-After
	}{
		{"earliest first", "5", "60"},
		{"earliest last", "60", "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			first := upstreamtest.New(t)
			second := upstreamtest.New(t)
			sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "a", "apiKey": "k",
				"providerSpecificData": map[string]any{"baseUrl": first.URL()}})
			sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-b", "name": "b",
				"providerSpecificData": map[string]any{"baseUrl": second.URL(), "prefix": "local", "enabledModels": []string{"llama-3"}}})
			require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{
				{"name": "chatter", "models": []string{chatModel, "local/llama-3"}},
			}}).Status)
			first.SetDefault(pathChat, upstreamtest.RateLimited(tc.first))
			second.SetDefault(pathChat, upstreamtest.RateLimited(tc.second))

			for _, when := range []string{"tried", "cooling"} {
				r := chatAsk(t, sb, "chatter", "x", false)
				require.Equal(t, http.StatusTooManyRequests, r.Status, "%s: %s", when, r.Body)
				ra := retryAfter(t, r)
				assert.LessOrEqual(t, ra, 5, "%s: Retry-After is the earliest cooldown end among the combo's models", when)
				assert.GreaterOrEqual(t, ra, 1, when)
				assert.Equal(t, "rate_limit_exceeded", errorCode(r.Response), when)
			}
			assert.Equal(t, 1, first.Count(pathChat), "not called while cooling")
			assert.Equal(t, 1, second.Count(pathChat), "not called while cooling")
		})
	}
}

// Row 19 with a 429 last: every connection failed, the last with a 429
// whose Retry-After is an HTTP date (RFC 9110 allows it beside seconds).
// The 429 passed through keeps a Retry-After, in seconds.
func TestPassedThrough429KeepsDateRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		atMost int
	}{
		{"HTTP date", []string{"Retry-After", time.Now().Add(40 * time.Second).UTC().Format(http.TimeFormat)}, 41},
		{"fractional seconds", []string{"Retry-After", "2.5"}, 3},
		{"milliseconds", []string{"Retry-After-Ms", "1500"}, 2},
		{"seconds", []string{"Retry-After", "7"}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			p.primary.Enqueue(pathChat, upstreamtest.Overloaded())
			p.fallback.Enqueue(pathChat, upstreamtest.Status(http.StatusTooManyRequests,
				`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
				tc.header...))
			r := chatAsk(t, p.sb, chatModel, "x", false)
			require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
			ra := retryAfter(t, r)
			assert.GreaterOrEqual(t, ra, 1)
			assert.LessOrEqual(t, ra, tc.atMost, "the upstream said %s", tc.header[1])
		})
	}
}
