package node_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// codexConfig is a ~/.codex/config.toml with a provider entry on the
// gateway's /v1, speaking the Responses wire API.
func codexConfig(baseURL, model string) string {
	return `model = "` + model + `"
model_provider = "switchboard"

[model_providers.switchboard]
name = "Switchboard"
base_url = "` + baseURL + `/v1"
env_key = "SWITCHBOARD_API_KEY"
wire_api = "responses"
`
}

// runCodex runs `codex exec` on prompt from a new home whose config points
// Codex at model on the gateway at baseURL with key; its answers are
// runAgentFailing's.
func runCodex(t *testing.T, bin, baseURL, key, model, prompt string) (stdout, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".codex"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(codexConfig(baseURL, model)), 0o600))
	return runAgentFailing(t, home, bin, map[string]string{
		"SWITCHBOARD_API_KEY": key,
		"CODEX_HOME":          filepath.Join(home, ".codex"),
	}, "exec", "--skip-git-repo-check", prompt)
}

// Codex (`codex exec`, pinned in .ci/run) against serve and a fake upstream
// of each shape: it must print the fake's answer.
func TestCodex(t *testing.T) {
	bin := agentBin(t, "codex")
	for _, tc := range []struct {
		name, provider, model, path string
		data                        map[string]any
	}{
		{"responses upstream", "openai", chatModel, pathResponses, nil},
		{"chat upstream", "openai-compatible-local", "local/gpt-4o-mini", pathChat, map[string]any{"prefix": "local"}},
		{"anthropic upstream", "anthropic-compatible-claude", "claude/claude-sonnet-4-6", "/v1/messages",
			map[string]any{"prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithoutToolCalls())
			data := map[string]any{"baseUrl": up.URL()}
			for k, v := range tc.data {
				data[k] = v
			}
			sb.CreateConnection(t, map[string]any{"provider": tc.provider, "name": "c", "apiKey": "sk-up", "providerSpecificData": data})
			key := gatewayKey(t, sb)
			out, errOut, err := runCodex(t, bin, sb.BaseURL, key, tc.model, "say pineapple")
			require.NoError(t, err, "codex\nstdout: %s\nstderr: %s", out, errOut)
			t.Logf("codex printed: %q\nstderr: %.2000s", out, errOut)
			assert.Contains(t, out, upstreamtest.EchoPrefix, "Codex printed the fake's answer")
			assert.Contains(t, out, "say pineapple")
			n := 0
			for _, r := range up.Requests() {
				if r.Path == tc.path {
					n++
				}
			}
			require.Positive(t, n, "Codex's requests reached the upstream")
		})
	}
}

// The real Codex in a tool loop on reasoning models behind an
// openai-compatible connection: the model reasons and calls get_goal, and
// Codex sends the history back with the reasoning item the gateway made of
// the reasoning. DeepSeek's thinking mode gets it up again as
// reasoning_content; a server refusing that member (the fake as Groq) is
// asked again without it.
func TestCodexToolLoopOnReasoningModels(t *testing.T) {
	bin := agentBin(t, "codex")
	for _, tc := range reasoningServers {
		t.Run(tc.name, func(t *testing.T) {
			sb, up, key := reasoningUpstream(t, tc.opt, upstreamtest.WithToolCallsOnly("get_goal"))
			out, errOut, err := runCodex(t, bin, sb.BaseURL, key, "ds/deepseek-v4-flash", "plan the work")
			require.NoError(t, err, "codex\nstdout: %s\nstderr: %s", out, errOut)
			assert.Contains(t, out, upstreamtest.EchoPrefix, "Codex printed the model's answer after the tool (stderr: %.2000s)", errOut)
			tc.check(t, up)
		})
	}
}
