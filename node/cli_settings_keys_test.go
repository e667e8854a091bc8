package node_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The CLI settings routes create a gateway key when the caller gives none
// and write it into the tool's settings file. Posting again reuses it; a
// key the caller gives replaces it, and DELETE removes it: a key the route
// created that no file holds any more is revoked, and the caller's own key
// never is.
func TestCLISettingsRevokeTheKeysTheyCreated(t *testing.T) {
	home := t.TempDir()
	cfg := nodetest.Config(t.TempDir())
	cfg.CLIHomeDir = home
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini"}}})
	codexToken := regexp.MustCompile(`(?m)^experimental_bearer_token = "([^"]*)"$`)
	for _, tool := range []struct {
		route string
		key   func() string
	}{
		{"/api/cli-tools/claude-settings", func() string {
			b, err := os.ReadFile(filepath.Join(home, ".claude", "settings.json"))
			require.NoError(t, err)
			var s struct{ Env map[string]string }
			require.NoError(t, json.Unmarshal(b, &s))
			return s.Env["ANTHROPIC_AUTH_TOKEN"]
		}},
		{"/api/cli-tools/codex-settings", func() string {
			b, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
			require.NoError(t, err)
			if m := codexToken.FindSubmatch(b); m != nil {
				return string(m[1])
			}
			return ""
		}},
	} {
		t.Run(tool.route, func(t *testing.T) {
			works := func(key string) int {
				return sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+key).Status
			}
			post := func(body map[string]any) {
				t.Helper()
				r := sb.Admin(t, http.MethodPost, tool.route, body)
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			}
			post(map[string]any{"model": "openai/gpt-4o-mini"})
			first := tool.key()
			post(map[string]any{"model": "openai/gpt-4o-mini"})
			assert.Equal(t, first, tool.key(), "the route's key still valid is reused")
			assert.Equal(t, http.StatusOK, works(first))

			mine := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "mine"})
			require.Equal(t, http.StatusCreated, mine.Status, "%s", mine.Body)
			myKey := mine.JSON["key"].(string)
			post(map[string]any{"model": "openai/gpt-4o-mini", "apiKey": myKey})
			assert.Equal(t, myKey, tool.key())
			assert.Equal(t, http.StatusUnauthorized, works(first), "the replaced key the route created is revoked")

			post(map[string]any{"model": "openai/gpt-4o-mini"})
			second := tool.key()
			require.NotEqual(t, myKey, second)
			assert.Equal(t, http.StatusOK, works(myKey), "the caller's key replaced is not revoked")
			require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, tool.route, nil).Status)
			assert.Equal(t, http.StatusUnauthorized, works(second), "the removed key the route created is revoked")

			post(map[string]any{"model": "openai/gpt-4o-mini", "apiKey": myKey})
			require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, tool.route, nil).Status)
			assert.Equal(t, http.StatusOK, works(myKey), "the caller's key removed is not revoked")

			keys := sb.Admin(t, http.MethodGet, "/api/keys", nil).JSON["keys"].([]any)
			require.Len(t, keys, 1, "the caller's key is the only one left")
			assert.Equal(t, "mine", keys[0].(map[string]any)["name"])
			require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/keys/"+keys[0].(map[string]any)["id"].(string), nil).Status)
		})
	}
}

// A POST whose settings file cannot be written answers 500 and leaves no
// key behind in core: the key it created for the file is revoked.
func TestCLISettingsLeaveNoKeyWhenTheWriteFails(t *testing.T) {
	home := t.TempDir()
	cfg := nodetest.Config(t.TempDir())
	cfg.CLIHomeDir = home
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	for route, dir := range map[string]string{"/api/cli-tools/claude-settings": ".claude", "/api/cli-tools/codex-settings": ".codex"} {
		t.Run(route, func(t *testing.T) {
			// A directory that is a symlink to nowhere reads as no file
			// but cannot be created.
			require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "unmounted"), filepath.Join(home, dir)))
			r := sb.Admin(t, http.MethodPost, route, map[string]any{"model": "openai/gpt-4o-mini"})
			require.Equal(t, http.StatusInternalServerError, r.Status, "%s", r.Body)
			keys := sb.Admin(t, http.MethodGet, "/api/keys", nil).JSON["keys"].([]any)
			assert.Empty(t, keys, "the key the POST created is revoked")
		})
	}
}
