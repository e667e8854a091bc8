package node_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
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
