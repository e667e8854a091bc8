package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// A stream that ends whole (its finish and [DONE], or Anthropic's
// message_stop) from an upstream that reports no usage (or zeros) is
// recorded as a whole answer is: about four characters a token of the
// request's text (prompt) and of the text delivered (completion), marked
// estimated, not partial, on every dialect. The client's stream keeps
// what the upstream sent. An upstream that reports usage is recorded by
// it.
func TestChatStreamUsageEstimatedWhenTheUpstreamReportsNone(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "l",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	anth := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": anth.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})

	const prompt = "a prompt of 20 chars" // 5 tokens
	sse := func(events ...string) string { return strings.Join(events, "") }
	chunk := func(delta, finish string) string {
		return "data: " + `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,` +
			`"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	// "twelve chars": 3 tokens.
	chunks := func(usage string) string {
		s := chunk(`{"role":"assistant","content":"twelve"}`, "null") + chunk(`{"content":" chars"}`, `"stop"`)
		if usage != "" {
			s += "data: " + `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":` + usage + "}\n\n"
		}
		return s + "data: [DONE]\n\n"
	}
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	message := func(startUsage, deltaUsage string) string {
		return sse(
			ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6",`+
				`"content":[],"stop_reason":null,"stop_sequence":null`+startUsage+`}}`),
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"twelve chars"}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null}`+deltaUsage+`}`),
			ev("message_stop", `{"type":"message_stop"}`))
	}
	zeroMessage := message(`,"usage":{"input_tokens":0,"output_tokens":0}`, `,"usage":{"output_tokens":0}`)
	chatBody := func(model string, includeUsage bool) map[string]any {
		b := map[string]any{"model": model, "stream": true, "messages": []map[string]any{{"role": "user", "content": prompt}}}
		if includeUsage {
			b["stream_options"] = map[string]any{"include_usage": true}
		}
		return b
	}
	responsesBody := func(model string) map[string]any {
		return map[string]any{"model": model, "input": prompt, "store": false, "stream": true}
	}
	for _, tc := range []struct {
		name       string
		up         *upstreamtest.Server
		upPath     string
		stream     string
		path       string
		body       map[string]any
		want       [3]int64 // prompt, completion, total
		estimated  bool
		endpoint   string
		clientSees func(t *testing.T, body string)
	}{
		{"chat, no usage", up, pathChat, chunks(""), pathChat, chatBody("local/gpt-4o-mini", false), [3]int64{5, 3, 8}, true, "chat.completions",
			func(t *testing.T, body string) {
				assert.Equal(t, chunks(""), body, "the upstream's stream as it came")
			}},
		{"chat, zero usage", up, pathChat, chunks(`{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`), pathChat,
			chatBody("local/gpt-4o-mini", true), [3]int64{5, 3, 8}, true, "chat.completions",
			func(t *testing.T, body string) {
				assert.Equal(t, chunks(`{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`), body, "the upstream's stream as it came")
			}},
		{"chat to anthropic, zero usage", anth, pathMessages, zeroMessage, pathChat, chatBody("claude/claude-sonnet-4-6", false),
			[3]int64{5, 3, 8}, true, "chat.completions", nil},
		// "be brief" and the prompt: 28 characters.
		{"messages to chat", up, pathChat, chunks(""), pathMessages, messagesBody("local/gpt-4o-mini", prompt, true), [3]int64{7, 3, 10}, true, "messages", nil},
		{"messages to anthropic, zero usage", anth, pathMessages, zeroMessage, pathMessages, messagesBody("claude/claude-sonnet-4-6", prompt, true),
			[3]int64{7, 3, 10}, true, "messages",
			func(t *testing.T, body string) {
				assert.Equal(t, zeroMessage, body, "the upstream's stream as it came")
			}},
		{"messages to anthropic, no usage", anth, pathMessages, message("", ""), pathMessages, messagesBody("claude/claude-sonnet-4-6", prompt, true),
			[3]int64{7, 3, 10}, true, "messages", nil},
		{"responses to chat", up, pathChat, chunks(""), pathResponses, responsesBody("local/gpt-4o-mini"), [3]int64{5, 3, 8}, true, "responses", nil},
		{"responses to anthropic, zero usage", anth, pathMessages, zeroMessage, pathResponses, responsesBody("claude/claude-sonnet-4-6"),
			[3]int64{5, 3, 8}, true, "responses", nil},
		{"usage reported", up, pathChat, chunks(`{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}`), pathChat,
			chatBody("local/gpt-4o-mini", false), [3]int64{9, 2, 11}, false, "chat.completions", nil},
		{"anthropic usage reported", anth, pathMessages, message(`,"usage":{"input_tokens":9,"output_tokens":1}`, `,"usage":{"output_tokens":2}`),
			pathMessages, messagesBody("claude/claude-sonnet-4-6", prompt, true), [3]int64{9, 2, 11}, false, "messages", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(usageEvents(t, sb))
			tc.up.Enqueue(tc.upPath, upstreamtest.Status(http.StatusOK, tc.stream, "Content-Type", "text/event-stream"))
			r := sb.Do(t, http.MethodPost, tc.path, tc.body)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			require.NotContains(t, string(r.Body), `"error":{`, "a stream that ended whole: %s", r.Body)
			if tc.clientSees != nil {
				tc.clientSees(t, string(r.Body))
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
