package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// A whole chat answer from an upstream that reports no usage (or zeros) is
// recorded with the gateway's count, as a cut stream's and embeddings' are:
// about four characters a token of the request's text (prompt) and of the
// answer's (completion), marked estimated, on every dialect. The client's
// answer keeps what the upstream sent. An upstream that reports usage is
// recorded by it.
func TestChatWholeUsageEstimatedWhenTheUpstreamReportsNone(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "l",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	anth := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": anth.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})

	const prompt = "a prompt of 20 chars" // 5 tokens
	completion := func(usage string) string {
		return `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":"twelve chars"},"finish_reason":"stop"}]` + usage + `}`
	}
	message := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6",` +
		`"content":[{"type":"text","text":"twelve chars"}],"stop_reason":"end_turn","stop_sequence":null}`
	chatBody := map[string]any{"model": "local/gpt-4o-mini", "messages": []map[string]any{{"role": "user", "content": prompt}}}
	for _, tc := range []struct {
		name       string
		up         *upstreamtest.Server
		upPath     string
		answer     string
		path       string
		body       map[string]any
		want       [3]int64 // prompt, completion, total
		estimated  bool
		endpoint   string
		clientSees func(t *testing.T, r nodetest.Response)
	}{
		{"chat, no usage", up, pathChat, completion(""), pathChat, chatBody, [3]int64{5, 3, 8}, true, "chat.completions",
			func(t *testing.T, r nodetest.Response) {
				_, ok := r.JSON["usage"]
				assert.False(t, ok, "the upstream's answer as it came: %s", r.Body)
			}},
		{"chat, zero usage", up, pathChat, completion(`,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`), pathChat, chatBody,
			[3]int64{5, 3, 8}, true, "chat.completions",
			func(t *testing.T, r nodetest.Response) {
				assert.Equal(t, map[string]any{"prompt_tokens": 0.0, "completion_tokens": 0.0, "total_tokens": 0.0}, r.JSON["usage"])
			}},
		// "be brief" and the prompt: 28 characters.
		{"messages to chat", up, pathChat, completion(""), pathMessages, messagesBody("local/gpt-4o-mini", prompt, false), [3]int64{7, 3, 10}, true, "messages", nil},
		{"messages to anthropic", anth, pathMessages, message, pathMessages, messagesBody("claude/claude-sonnet-4-6", prompt, false), [3]int64{7, 3, 10}, true, "messages", nil},
		{"responses to chat", up, pathChat, completion(""), pathResponses, map[string]any{"model": "local/gpt-4o-mini", "input": prompt, "store": false},
			[3]int64{5, 3, 8}, true, "responses", nil},
		{"usage reported", up, pathChat, completion(`,"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}`), pathChat, chatBody,
			[3]int64{9, 2, 11}, false, "chat.completions", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(usageEvents(t, sb))
			tc.up.Enqueue(tc.upPath, upstreamtest.Status(http.StatusOK, tc.answer))
			r := sb.Do(t, http.MethodPost, tc.path, tc.body)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			if tc.clientSees != nil {
				tc.clientSees(t, r)
			}

			var evs []*busv1.UsageEvent
			require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) == before+1 }, 5*time.Second, 20*time.Millisecond)
			ev := evs[len(evs)-1]
			assert.Equal(t, tc.endpoint, ev.GetEndpoint())
			assert.Equal(t, tc.want, [3]int64{ev.GetPromptTokens(), ev.GetCompletionTokens(), ev.GetTotalTokens()})
			assert.Equal(t, tc.estimated, ev.GetTokensEstimated())
			assert.False(t, ev.GetPartial())
		})
	}
}
