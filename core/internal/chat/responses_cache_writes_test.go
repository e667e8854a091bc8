package chat

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// A Responses answer translated from an Anthropic-shaped upstream reports
// the tokens the upstream wrote to its prompt cache as
// input_tokens_details.cache_write_tokens, which Codex reads (its
// cache_write_input_tokens), beside the cache reads (cached_tokens), where
// the writes were counted in input_tokens but reported nowhere apart.
func TestResponsesFromAnthropicReportCacheWrites(t *testing.T) {
	reg := provider.NewRegistry()
	spec, ok := reg.Lookup("anthropic")
	require.True(t, ok)
	usage := `{"input_tokens":4332,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":5}`
	type details struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens     int64 `json:"cached_tokens"`
			CacheWriteTokens int64 `json:"cache_write_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	}
	check := func(t *testing.T, u details) {
		t.Helper()
		assert.Equal(t, int64(6432), u.InputTokens, "every input token, cached or not")
		assert.Equal(t, int64(2000), u.InputTokensDetails.CachedTokens)
		assert.Equal(t, int64(100), u.InputTokensDetails.CacheWriteTokens)
		assert.Equal(t, int64(5), u.OutputTokens)
		assert.Equal(t, int64(6437), u.TotalTokens)
	}

	t.Run("streamed", func(t *testing.T) {
		in, err := parse(DialectResponses, []byte(`{"model":"m","stream":true,"input":"hi"}`))
		require.NoError(t, err)
		tr := pick(DialectResponses, spec, "claude-sonnet-4-6").events(in, "m")
		var completed []byte
		emit := func(name string, data []byte) error {
			if name == "response.completed" {
				completed = data
			}
			return nil
		}
		for _, e := range [][2]string{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":` + usage + `}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			_, err := tr.event(e[0], []byte(e[1]), emit)
			require.NoError(t, err)
		}
		complete, err := tr.finish(emit)
		require.NoError(t, err)
		require.True(t, complete)
		var ev struct {
			Response struct {
				Usage details `json:"usage"`
			} `json:"response"`
		}
		require.NoError(t, json.Unmarshal(completed, &ev), "%s", completed)
		check(t, ev.Response.Usage)
	})

	t.Run("whole", func(t *testing.T) {
		in, err := parse(DialectResponses, []byte(`{"model":"m","input":"hi"}`))
		require.NoError(t, err)
		raw := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hello"}],` +
			`"stop_reason":"end_turn","stop_sequence":null,"usage":` + usage + `}`)
		out, _, err := pick(DialectResponses, spec, "claude-sonnet-4-6").whole(in, raw, "m")
		require.NoError(t, err)
		var resp struct {
			Usage details `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(out, &resp), "%s", out)
		check(t, resp.Usage)
	})
}
