package chat

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// A Messages stream translated from an upstream that reports its usage only
// at the end (Chat Completions, Responses) starts, as Anthropic's does, with
// the input tokens in message_start: the gateway's estimate, count_tokens'
// figure, since the upstream's is not known yet; message_delta carries the
// upstream's. Clients that read the input from message_start alone (many
// Anthropic clients) saw 0 there.
func TestMessagesStreamStartsWithInputEstimate(t *testing.T) {
	reg := provider.NewRegistry()
	body := []byte(`{"model":"m","max_tokens":100,"stream":true,"system":"be brief and answer in one line",` +
		`"messages":[{"role":"user","content":"what is the capital of France? answer with one word"}]}`)
	for _, tc := range []struct {
		provider string
		events   [][2]string
	}{
		{"openai", [][2]string{
			{"", `{"id":"c1","choices":[{"delta":{"role":"assistant","content":"Paris"}}]}`},
			{"", `{"id":"c1","choices":[{"delta":{},"finish_reason":"stop"}]}`},
			{"", `{"id":"c1","choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":2,"total_tokens":1236}}`},
			{"", `[DONE]`},
		}},
		{"codex", [][2]string{
			{"response.created", `{"type":"response.created","response":{"id":"resp_1","model":"m","status":"in_progress","output":[]}}`},
			{"response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Paris"}`},
			{"response.completed", `{"type":"response.completed","response":{"id":"resp_1","model":"m","status":"completed","output":[],` +
				`"usage":{"input_tokens":1234,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1236}}}`},
		}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			spec, ok := reg.Lookup(tc.provider)
			require.True(t, ok)
			in, err := parse(DialectMessages, body)
			require.NoError(t, err)
			var counted struct {
				InputTokens int64 `json:"input_tokens"`
			}
			require.NoError(t, json.Unmarshal(estimateTokens(in), &counted))
			require.Positive(t, counted.InputTokens)

			tr := pick(DialectMessages, spec, "m").events(in, "m")
			usage := map[string]map[string]int64{}
			emit := func(name string, data []byte) error {
				var ev struct {
					Message struct {
						Usage map[string]int64 `json:"usage"`
					} `json:"message"`
					Usage map[string]int64 `json:"usage"`
				}
				require.NoError(t, json.Unmarshal(data, &ev), "%s", data)
				switch name {
				case "message_start":
					usage[name] = ev.Message.Usage
				case "message_delta":
					usage[name] = ev.Usage
				}
				return nil
			}
			for _, e := range tc.events {
				_, err := tr.event(e[0], []byte(e[1]), emit)
				require.NoError(t, err)
			}
			complete, err := tr.finish(emit)
			require.NoError(t, err)
			require.True(t, complete)
			assert.Equal(t, counted.InputTokens, usage["message_start"]["input_tokens"], "message_start: count_tokens' estimate")
			assert.Equal(t, int64(0), usage["message_start"]["output_tokens"])
			assert.Equal(t, int64(1234), usage["message_delta"]["input_tokens"], "message_delta: the upstream's count")
			assert.Equal(t, int64(2), usage["message_delta"]["output_tokens"])
		})
	}
}
