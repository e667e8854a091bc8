package node_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The agents configured by nothing but our own settings routes: the route
// writes ~/.claude/settings.json or ~/.codex/config.toml in the home the
// gateway serves, and the CLI, run with that home and no other setting,
// prints the fake's answer.
func TestAgentsConfiguredBySettingsRoutes(t *testing.T) {
	claude, codex := agentBin(t, "claude"), agentBin(t, "codex")
	home := t.TempDir()
	cfg := nodetest.Config(t.TempDir())
	cfg.CLIHomeDir = home
	// The routes write the public URL into the files: a fixed port for it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.HTTPAddr = ln.Addr().String()
	cfg.PublicURL = "http://" + cfg.HTTPAddr
	require.NoError(t, ln.Close())
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithoutToolCalls())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	// A user's own Codex setting the route must keep.
	var toml []byte
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".codex"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("approval_policy = \"never\"\n"), 0o600))

	r := sb.Admin(t, http.MethodPost, "/api/cli-tools/claude-settings", map[string]any{"model": chatModel, "smallFastModel": chatModel, "haikuModel": chatModel})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = sb.Admin(t, http.MethodPost, "/api/cli-tools/codex-settings", map[string]any{"model": chatModel})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, true, r.JSON["configured"])
	toml, err = os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
	require.NoError(t, err)
	assert.Contains(t, string(toml), `approval_policy = "never"`)

	env := map[string]string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
	out, _ := runAgent(t, home, claude, env, "-p", "say pineapple")
	assert.Contains(t, out, "echo: ", "Claude Code printed the fake's answer")
	assert.Contains(t, out, "say pineapple")

	out, _ = runAgent(t, home, codex, nil, "exec", "--skip-git-repo-check", "say papaya")
	assert.Contains(t, out, "echo: say papaya", "Codex printed the fake's answer")
	assert.Positive(t, up.Count(pathChat), "Claude Code went through Messages to chat")
	assert.Positive(t, up.Count(pathResponses), "Codex went through Responses natively")
}

// Claude Code configured by the settings route alone, posting nothing: the
// gateway listens on port 0 and its models are prefix/model, so the route
// must write the listener's real port and models the machine routes
// (Claude Code's own defaults, claude-sonnet-…, resolve nowhere here).
func TestClaudeConfiguredByRouteAloneOnPrefixedModels(t *testing.T) {
	claude := agentBin(t, "claude")
	home := t.TempDir()
	cfg := nodetest.Config(t.TempDir())
	cfg.CLIHomeDir = home
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.PublicURL = "http://" + cfg.HTTPAddr // what the config's default makes of it
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithoutToolCalls(),
		upstreamtest.WithModels("gpt-4.1", "gpt-4o-mini"))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "pfx"}})

	r := sb.Admin(t, http.MethodPost, "/api/cli-tools/claude-settings", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, sb.BaseURL, r.JSON["gatewayUrl"], "the listener's real port")
	models, _ := r.JSON["models"].(map[string]any)
	require.NotNil(t, models, "%s", r.Body)
	for _, k := range []string{"ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"} {
		v, _ := models[k].(string)
		assert.True(t, strings.HasPrefix(v, "pfx/"), "%s = %q is a routable prefixed model", k, v)
	}
	assert.Contains(t, models["ANTHROPIC_SMALL_FAST_MODEL"], "mini", "a small model for the small slot")

	out, _ := runAgent(t, home, claude, map[string]string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}, "-p", "say mango")
	assert.Contains(t, out, "echo: ", "Claude Code printed the fake's answer")
	assert.Contains(t, out, "say mango")
	assert.Positive(t, up.Count(pathChat))
}
