package chat

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// A request that names no output cap reaches Anthropic with the model's own
// limit when it is streamed (the Codex CLI never sends max_output_tokens),
// so a long answer or patch is not cut at a few thousand tokens; a model
// the gateway knows nothing of gets Claude Code's default, and a whole
// answer, which Anthropic sends only once it is written, a cap it finishes
// within the first-byte timeout.
func TestAnthropicOutputCapWithoutClientCap(t *testing.T) {
	spec, ok := provider.NewRegistry().Lookup("anthropic")
	require.True(t, ok)
	for _, tc := range []struct {
		dialect Dialect
		model   string
		body    string
		want    int64
	}{
		{DialectResponses, "claude-sonnet-4-6", `{"model":"m","input":"hi","stream":true}`, 128000},
		{DialectResponses, "claude-haiku-4-5-20251001", `{"model":"m","input":"hi","stream":true}`, 64000},
		{DialectResponses, "claude-opus-4-8", `{"model":"m","input":"hi","stream":true,"reasoning":{"effort":"high"}}`, 128000},
		{DialectChat, "claude-opus-4-7", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, 128000},
		{DialectChat, "claude-some-future-model", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, 32000},
		{DialectResponses, "claude-sonnet-4-6", `{"model":"m","input":"hi"}`, 4096},
		{DialectChat, "claude-sonnet-4-6", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 4096},
		{DialectChat, "claude-sonnet-4-6", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":100}`, 100},
		{DialectResponses, "claude-sonnet-4-6", `{"model":"m","input":"hi","stream":true,"max_output_tokens":200}`, 200},
	} {
		in, err := parse(tc.dialect, []byte(tc.body))
		require.NoError(t, err)
		body, err := pick(tc.dialect, spec, tc.model).request(in, tc.model)
		require.NoError(t, err, tc.body)
		var got struct {
			MaxTokens int64 `json:"max_tokens"`
		}
		require.NoError(t, json.Unmarshal(body, &got))
		assert.Equal(t, tc.want, got.MaxTokens, "%s %s", tc.model, tc.body)
	}
}
