package node_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Claude Code (`claude -p`, pinned in .ci/run) against serve and a fake
// upstream of each shape: it must print the fake's answer. The
// Anthropic-shaped upstream gets Claude Code's requests passed through; the
// OpenAI-shaped one gets them translated.
func TestClaudeCode(t *testing.T) {
	bin := agentBin(t, "claude")
	for _, tc := range []struct {
		name, provider, model, path string
	}{
		{"anthropic-shaped upstream", "anthropic-compatible-claude", "claude/claude-sonnet-4-6", "/v1/messages"},
		{"openai-shaped upstream", "openai", chatModel, "/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithoutToolCalls())
			data := map[string]any{"baseUrl": up.URL()}
			if tc.provider != "openai" {
				data["prefix"], data["enabledModels"] = "claude", []string{"claude-sonnet-4-6"}
			}
			sb.CreateConnection(t, map[string]any{"provider": tc.provider, "name": "c", "apiKey": "sk-up", "providerSpecificData": data})
			key := gatewayKey(t, sb)
			out, _ := runAgent(t, t.TempDir(), bin, map[string]string{
				"ANTHROPIC_BASE_URL":                       sb.BaseURL,
				"ANTHROPIC_API_KEY":                        key,
				"ANTHROPIC_MODEL":                          tc.model,
				"ANTHROPIC_SMALL_FAST_MODEL":               tc.model,
				"ANTHROPIC_DEFAULT_HAIKU_MODEL":            tc.model,
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			}, "-p", "say pineapple")
			assert.Contains(t, out, upstreamtest.EchoPrefix, "Claude Code printed the fake's answer")
			assert.Contains(t, out, "say pineapple", "the fake's answer echoes the prompt")
			n := 0
			for _, r := range up.Requests() {
				if r.Path == tc.path {
					n++
					assert.NotContains(t, string(r.Body), key, "the gateway's key never goes upstream")
				}
			}
			require.Positive(t, n, "Claude Code's requests reached the upstream")
		})
	}
}
