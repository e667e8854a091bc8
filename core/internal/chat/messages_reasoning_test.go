package chat

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// Claude Code's thinking goes to the ChatGPT backend of codex, whose models
// all reason, as reasoning effort; to a Chat Completions upstream, whose
// model may not reason, it is left out.
func TestMessagesThinkingByUpstream(t *testing.T) {
	reg := provider.NewRegistry()
	body := []byte(`{"model":"m","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":10000},"messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		provider, model string
		// effort is the reasoning effort sent ("": none).
		effort string
	}{
		{"codex", "gpt-5-codex", "medium"},
		{"openai", "gpt-4o", ""},
		{"groq", "llama-3.3-70b-versatile", ""},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			spec, ok := reg.Lookup(tc.provider)
			require.True(t, ok)
			in, err := parse(DialectMessages, body)
			require.NoError(t, err)
			got, err := pick(DialectMessages, spec, tc.model).request(in, tc.model)
			require.NoError(t, err)
			var sent struct {
				ReasoningEffort string `json:"reasoning_effort"`
				Reasoning       struct {
					Effort string `json:"effort"`
				} `json:"reasoning"`
			}
			require.NoError(t, json.Unmarshal(got, &sent), "%s", got)
			assert.Equal(t, tc.effort, sent.ReasoningEffort+sent.Reasoning.Effort, "%s", got)
		})
	}
}
