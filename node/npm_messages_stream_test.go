package node_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// sseBody is a server-sent event stream of name, data pairs.
func sseBody(events ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(events); i += 2 {
		b.WriteString("event: " + events[i] + "\ndata: " + events[i+1] + "\n\n")
	}
	return b.String()
}

// streamedRaw is the harness's stream result with the events as the SDK
// parsed them.
type streamedRaw struct {
	Events []string         `json:"events"`
	Raw    []map[string]any `json:"raw"`
	Msg    struct {
		Content []map[string]any `json:"content"`
		Stop    string           `json:"stop_reason"`
		Usage   map[string]any   `json:"usage"`
	} `json:"message"`
}

// deltaTypes are the delta types of a stream's content_block_delta events.
func (s streamedRaw) deltaTypes() []string {
	var out []string
	for _, ev := range s.Raw {
		if ev["type"] == "content_block_delta" {
			if d, ok := ev["delta"].(map[string]any); ok {
				out = append(out, d["type"].(string))
			}
		}
	}
	return out
}

// sdkBothShapes starts an instance serving "claude/claude-sonnet-4-6" from a
// fake Anthropic upstream and chatModel from a fake OpenAI one, and returns
// the Anthropic SDK's client for it with the two upstreams.
func sdkBothShapes(t *testing.T) (nodetest.NodeClient, *upstreamtest.Server, *upstreamtest.Server) {
	t.Helper()
	nodetest.NPM(t)
	sb := nodetest.Serve(t, t.TempDir())
	ant := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": ant.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	oai := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-oai"))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-oai",
		"providerSpecificData": map[string]any{"baseUrl": oai.URL()}})
	return sb.NPMClient(gatewayKey(t, sb)), ant, oai
}

// The SDK's stream helpers on both upstream shapes: an Anthropic stream of
// thinking (signed), redacted thinking and text cut by max_tokens reaches
// finalMessage() as Anthropic sent it; a chat stream's reasoning and text
// are thinking_delta and text_delta, its "length" max_tokens, its usage in
// message_delta; upstream errors are the SDK's error classes, with the Anthropic type it
// reads and the upstream's Retry-After.
func TestNPMAnthropicSDKStreamsAndErrors(t *testing.T) {
	client, ant, oai := sdkBothShapes(t)
	params := func(model string) map[string]any {
		return map[string]any{"model": model, "max_tokens": 20, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	}
	const claude = "claude/claude-sonnet-4-6"

	ant.Enqueue(upstreamtest.PathMessages, upstreamtest.Status(http.StatusOK, sseBody(
		"message_start", `{"type":"message_start","message":{"id":"msg_01X","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
		"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think."}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":0}`,
		"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":1}`,
		"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
		"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Hello wor"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":2}`,
		"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":20}}`,
		"message_stop", `{"type":"message_stop"}`,
	), "Content-Type", "text/event-stream"))
	oai.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, strings.Join([]string{
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Think"},"finish_reason":null}]}`,
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"ing."},"finish_reason":null}]}`,
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello wor"},"finish_reason":null}]}`,
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":4}}}`,
		`data: [DONE]`, ``}, "\n\n"), "Content-Type", "text/event-stream"))
	res := client.Ops(t, "anthropic.mjs",
		map[string]any{"op": "stream", "params": params(claude)},
		map[string]any{"op": "stream", "params": params(chatModel)},
	)

	var s streamedRaw
	res[0].Decode(t, &s)
	assert.Equal(t, []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}, s.Events)
	require.Len(t, s.Msg.Content, 3)
	assert.Equal(t, map[string]any{"type": "thinking", "thinking": "Let me think.", "signature": "EqQBCgIYAhIM"}, s.Msg.Content[0])
	assert.Equal(t, map[string]any{"type": "redacted_thinking", "data": "EmwKAhgB"}, s.Msg.Content[1])
	assert.Equal(t, "Hello wor", s.Msg.Content[2]["text"])
	assert.Equal(t, "max_tokens", s.Msg.Stop)

	res[1].Decode(t, &s)
	assert.Equal(t, "message_start", s.Events[0])
	assert.Equal(t, "message_stop", s.Events[len(s.Events)-1])
	assert.Equal(t, []string{"thinking_delta", "thinking_delta", "text_delta"}, s.deltaTypes())
	require.Len(t, s.Msg.Content, 2)
	assert.Equal(t, "thinking", s.Msg.Content[0]["type"])
	assert.Equal(t, "Thinking.", s.Msg.Content[0]["thinking"])
	assert.Equal(t, "Hello wor", s.Msg.Content[1]["text"])
	assert.Equal(t, "max_tokens", s.Msg.Stop)
	assert.Equal(t, float64(20), s.Msg.Usage["output_tokens"])
	assert.Equal(t, float64(8), s.Msg.Usage["input_tokens"], "cache reads apart, as Anthropic counts them")
	assert.Equal(t, float64(4), s.Msg.Usage["cache_read_input_tokens"])

	for _, tc := range []struct {
		name, model, path   string
		fault               upstreamtest.Fault
		class, typ          string
		status, retryBefore int
	}{
		{"anthropic overloaded", claude, upstreamtest.PathMessages, upstreamtest.Overloaded(), "OverloadedError", "overloaded_error", 529, 0},
		{"anthropic rate limited", claude, upstreamtest.PathMessages, upstreamtest.RateLimited("7"), "RateLimitError", "rate_limit_error", 429, 7},
		{"anthropic prompt too long", claude, upstreamtest.PathMessages,
			upstreamtest.AnthropicError(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), "BadRequestError", "invalid_request_error", 400, 0},
		{"chat overloaded", chatModel, pathChat, upstreamtest.Overloaded(), "ServiceUnavailableError", "api_error", 503, 0},
		{"chat rate limited", chatModel, pathChat, upstreamtest.RateLimited("7"), "RateLimitError", "rate_limit_error", 429, 7},
		{"chat context length", chatModel, pathChat, upstreamtest.OpenAIError(400, "invalid_request_error", "context_length_exceeded",
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."), "BadRequestError", "invalid_request_error", 400, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An instance of its own: an overloaded or rate-limited
			// connection cools down, and would answer the next case.
			client, ant, oai := sdkBothShapes(t)
			if tc.path == pathChat {
				oai.Enqueue(pathChat, tc.fault)
			} else {
				ant.Enqueue(tc.path, tc.fault)
			}
			r := client.Op(t, "anthropic.mjs", map[string]any{"op": "stream", "params": params(tc.model)})
			require.NotNil(t, r.Error, "result %s", r.Result)
			assert.Equal(t, tc.class, r.Error.Class)
			assert.Equal(t, tc.status, r.Error.Status)
			assert.Equal(t, tc.typ, r.Error.Type)
			assert.NotEmpty(t, r.Error.RequestID, "request-id")
			if tc.retryBefore > 0 {
				retry, err := strconv.Atoi(r.Error.Headers["retry-after"])
				require.NoError(t, err, "retry-after %q", r.Error.Headers["retry-after"])
				assert.True(t, retry >= 1 && retry <= tc.retryBefore, "retry-after %d", retry)
			}
		})
	}
}
