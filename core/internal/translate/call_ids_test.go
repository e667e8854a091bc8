package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tool calls an upstream sent without ids (some OpenAI-compatible servers
// do) get ids of the gateway's own on /v1/messages and /v1/responses, one
// per call: the client sends each result back under its call's id.
func TestToolCallsWithoutIDsGetTheirOwn(t *testing.T) {
	whole := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
		{"type":"function","function":{"name":"a","arguments":"{}"}},{"id":"","type":"function","function":{"name":"b","arguments":"{}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	chunks := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"a","arguments":""}}]}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"type":"function","function":{"name":"b","arguments":"{}"}}]}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}
	ids := func(t *testing.T, found []string, prefix string) {
		t.Helper()
		require.Len(t, found, 2)
		for _, id := range found {
			assert.True(t, strings.HasPrefix(id, prefix) && len(id) > len(prefix), "%q", id)
		}
		assert.NotEqual(t, found[0], found[1])
	}

	t.Run("messages", func(t *testing.T) {
		out, _, err := OpenAIToAnthropicResponse([]byte(whole), "m")
		require.NoError(t, err)
		var msg struct {
			Content []struct{ ID string } `json:"content"`
		}
		require.NoError(t, json.Unmarshal(out, &msg))
		ids(t, []string{msg.Content[0].ID, msg.Content[1].ID}, "toolu_")

		var found []string
		tr := NewChunkToMessages("m")
		emit := func(name string, data []byte) error {
			var ev struct {
				ContentBlock struct{ ID string } `json:"content_block"`
			}
			if name == "content_block_start" && json.Unmarshal(data, &ev) == nil {
				found = append(found, ev.ContentBlock.ID)
			}
			return nil
		}
		for _, c := range chunks {
			require.NoError(t, tr.Chunk([]byte(c), emit))
		}
		_, err = tr.Finish(emit)
		require.NoError(t, err)
		ids(t, found, "toolu_")
	})

	t.Run("responses", func(t *testing.T) {
		out, _, err := Echo{}.Response([]byte(whole), "m")
		require.NoError(t, err)
		var resp struct {
			Output []struct {
				CallID string `json:"call_id"`
			} `json:"output"`
		}
		require.NoError(t, json.Unmarshal(out, &resp))
		ids(t, []string{resp.Output[0].CallID, resp.Output[1].CallID}, "call_")

		var found []string
		tr := Echo{}.Chunks("m")
		emit := func(name string, data []byte) error {
			var ev struct {
				Item struct {
					Type   string `json:"type"`
					CallID string `json:"call_id"`
				} `json:"item"`
			}
			if name == "response.output_item.done" && json.Unmarshal(data, &ev) == nil && ev.Item.Type == "function_call" {
				found = append(found, ev.Item.CallID)
			}
			return nil
		}
		for _, c := range chunks {
			require.NoError(t, tr.Chunk([]byte(c), emit))
		}
		_, err = tr.Finish(emit)
		require.NoError(t, err)
		ids(t, found, "call_")
	})
}
