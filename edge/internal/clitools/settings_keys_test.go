package clitools

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// settingsTool is one CLI settings route under test, with where it keeps
// the key it writes.
type settingsTool struct {
	name  string
	new   func(t *testing.T) (http.Handler, *fakeAdmin, string)
	token func(t *testing.T, path string) string
}

var settingsTools = []settingsTool{
	{"claude", func(t *testing.T) (http.Handler, *fakeAdmin, string) { return newHandler(t) },
		func(t *testing.T, path string) string {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var s struct{ Env map[string]string }
			require.NoError(t, json.Unmarshal(data, &s))
			return s.Env[EnvAuthToken]
		}},
	{"codex", func(t *testing.T) (http.Handler, *fakeAdmin, string) { return newCodexHandler(t) },
		func(t *testing.T, path string) string {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			raw, _ := parseTOML(data).tableValue(codexTable, "experimental_bearer_token")
			return tomlUnquote(raw)
		}},
}

// A route reuses the key it created while core still has it, creates a new
// one once it is revoked, and revokes its own key when DELETE removes it.
func TestCLISettingsReuseTheirKeyWhileItIsValid(t *testing.T) {
	for _, tool := range settingsTools {
		t.Run(tool.name, func(t *testing.T) {
			h, admin, path := tool.new(t)
			w, st := serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m"}`, true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, true, st["keyCreated"])
			w, st = serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m"}`, true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Nil(t, st["keyCreated"], "no key created")
			assert.Equal(t, 1, admin.created)
			assert.Equal(t, createdKey, tool.token(t, path))

			// Revoked elsewhere: a new key, nothing to revoke.
			delete(admin.keys, "abc123")
			w, st = serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m"}`, true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, "key002", st["keyId"])
			assert.Equal(t, 2, admin.created)
			assert.Empty(t, admin.revoked)

			w, _ = serve(t, h, http.MethodDelete, "127.0.0.1:1", "", true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, []string{"key002"}, admin.revoked)
			assert.NotContains(t, readCodexConfig(t, path), "key002", "the key's id goes with it")
		})
	}
}

// A key the user wrote into the file over the route's own, the route's
// record of its key left beside it, is the user's: it is not revoked.
func TestCLISettingsNeverRevokeAKeyTheUserWrote(t *testing.T) {
	for _, tool := range settingsTools {
		t.Run(tool.name, func(t *testing.T) {
			h, admin, path := tool.new(t)
			w, _ := serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m"}`, true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			userKey := "sk-" + testMachine + "-mine01-0123456789"
			admin.keys["mine01"] = "mine"
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), createdKey, userKey)), 0o600))

			w, _ = serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m"}`, true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, 2, admin.created, "the user's key is not the route's to reuse")
			w, _ = serve(t, h, http.MethodDelete, "127.0.0.1:1", "", true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, []string{"key002"}, admin.revoked)
			assert.True(t, admin.live("mine01"))
		})
	}
}

// A DELETE whose key cannot be revoked changes nothing and says so; a POST
// that replaced the file's key but could not revoke the old one says which
// key to revoke.
func TestCLISettingsReportAKeyTheyCouldNotRevoke(t *testing.T) {
	for _, tool := range settingsTools {
		t.Run(tool.name, func(t *testing.T) {
			h, admin, path := tool.new(t)
			w, _ := serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m"}`, true)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			admin.failDelete = true

			w, _ = serve(t, h, http.MethodDelete, "127.0.0.1:1", "", true)
			assert.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after), "a failed DELETE leaves the file as it was")

			w, out := serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m","apiKey":"sk-given-key"}`, true)
			assert.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
			assert.Equal(t, "key_not_revoked", out["error"].(map[string]any)["code"])
			assert.Contains(t, out["error"].(map[string]any)["message"], "/api/keys/abc123")
			assert.Equal(t, "sk-given-key", tool.token(t, path))
			assert.True(t, admin.live("abc123"))
		})
	}
}

// A POST whose settings file cannot be written (here its directory is a
// symlink to nowhere, which reads as no file but cannot be created) leaves
// no key it created behind, however often it is retried; a key the caller
// gave is never revoked.
func TestCLISettingsRevokeTheKeyAFailedWriteCreated(t *testing.T) {
	for _, tool := range settingsTools {
		t.Run(tool.name, func(t *testing.T) {
			h, admin, path := tool.new(t)
			require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "unmounted", "dotfiles"), filepath.Dir(path)))
			listed := func() []string {
				res, err := admin.ListAPIKeys(metadata.NewOutgoingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+testToken)), &corev1.ListAPIKeysRequest{})
				require.NoError(t, err)
				var ids []string
				for _, k := range res.GetKeys() {
					ids = append(ids, k.GetId())
				}
				return ids
			}
			for range 2 {
				w, out := serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m"}`, true)
				require.Equal(t, http.StatusInternalServerError, w.Code, w.Body.String())
				assert.Equal(t, "settings_file_error", out["error"].(map[string]any)["code"])
			}
			assert.Equal(t, 2, admin.created)
			assert.Empty(t, listed(), "no key the failed POSTs created is left")

			admin.keys["mine01"] = "mine"
			w, _ := serve(t, h, http.MethodPost, "127.0.0.1:1", `{"model":"m","apiKey":"sk-`+testMachine+`-mine01-0123456789"}`, true)
			require.Equal(t, http.StatusInternalServerError, w.Code, w.Body.String())
			assert.ElementsMatch(t, []string{"mine01"}, listed(), "the caller's key is not revoked")
		})
	}
}
