package clitools

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newCodexHandler(t *testing.T) (*CodexSettings, *fakeAdmin, string) {
	t.Helper()
	home := t.TempDir()
	admin := &fakeAdmin{}
	return &CodexSettings{
		Admin: admin, PublicURL: testGateway + "/", Home: home,
		LookPath: func(string) (string, error) { return "", errors.New("not found") },
	}, admin, filepath.Join(home, ".codex", "config.toml")
}

const userCodexConfig = `# my settings
model = "gpt-5"
approval_policy = "on-request"
model_provider = "openai"

[model_providers.switchboard]
name = "stale"
base_url = "http://old.example/v1"

[profiles.fast]
model = "gpt-5-mini"   # keep me

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "1"]
`

func TestCodexSettingsRoundTripKeepsTheUsersSettings(t *testing.T) {
	h, admin, path := newCodexHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(userCodexConfig), 0o644))

	w, st := serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"openai/gpt-5-codex"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, true, st["configured"])
	assert.Equal(t, true, st["keyCreated"])
	assert.Equal(t, "openai/gpt-5-codex", st["model"])
	assert.NotContains(t, w.Body.String(), createdKey, "the key is never sent back")
	assert.Equal(t, 1, admin.created)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(data)
	want := `# my settings
model = "openai/gpt-5-codex"
approval_policy = "on-request"
model_provider = "switchboard"

[profiles.fast]
model = "gpt-5-mini"   # keep me

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "1"]

[model_providers.switchboard]
# ` + codexNote + `
# switchboard-saved model = "gpt-5"
# switchboard-saved model_provider = "openai"
# switchboard-key-id abc123
name = "Switchboard"
base_url = "` + testGateway + `/v1"
wire_api = "responses"
experimental_bearer_token = "` + createdKey + `"
`
	assert.Equal(t, want, text)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file holds a key")

	w, st = serve(t, h, http.MethodDelete, "127.0.0.1:5000", "", true)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, false, st["configured"])
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "switchboard")
	assert.NotContains(t, string(data), createdKey)
	assert.Equal(t, `# my settings
model = "gpt-5"
approval_policy = "on-request"
model_provider = "openai"

[profiles.fast]
model = "gpt-5-mini"   # keep me

[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "1"]
`, string(data), "the user's own model and provider are back")
	assert.False(t, admin.live("abc123"), "the key the route created is revoked with its entry")
}

func TestCodexSettingsWithoutAFileAndRefusals(t *testing.T) {
	h, _, path := newCodexHandler(t)
	w, _ := serve(t, h, http.MethodPost, "192.0.2.7:5000", `{"model":"m"}`, true)
	assert.Equal(t, http.StatusForbidden, w.Code, "loopback callers only")
	w, _ = serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"m"}`, false)
	assert.Equal(t, http.StatusUnauthorized, w.Code, "the admin token is required")
	w, _ = serve(t, h, http.MethodPost, "127.0.0.1:5000", `{}`, true)
	assert.Equal(t, http.StatusBadRequest, w.Code, "a model is required")
	w, _ = serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"a\nb = 1"}`, true)
	assert.Equal(t, http.StatusBadRequest, w.Code, "no TOML injection through the model")
	w, _ = serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"`+strings.Repeat("m", maxBody)+`"}`, true)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code, "an oversized body is 413, as on the Claude route")
	_, err := os.Stat(path)
	assert.True(t, os.IsNotExist(err), "refused requests change nothing")

	w, st := serve(t, h, http.MethodPost, "[::1]:5000", `{"model":"m \"q\"","apiKey":"sk-given"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, true, st["configured"])
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "model_provider = \"switchboard\"\nmodel = \"m \\\"q\\\"\"\n"), string(data))
	assert.Contains(t, string(data), `experimental_bearer_token = "sk-given"`)
}

// Codex writes the directories the user trusts as [projects."<path>"]
// tables: our keys go before the first of them, as top-level keys, and the
// route then tells the truth when it says configured.
func TestCodexSettingsPutTopLevelKeysBeforeTrustedProjects(t *testing.T) {
	h, _, path := newCodexHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("[projects.\"/home/me/app\"]\ntrust_level = \"trusted\"\n"), 0o600))

	w, st := serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"openai/gpt-5-codex"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, true, st["configured"])
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want := `model_provider = "switchboard"
model = "openai/gpt-5-codex"
[projects."/home/me/app"]
trust_level = "trusted"

[model_providers.switchboard]
# ` + codexNote + `
# switchboard-saved model
# switchboard-saved model_provider
# switchboard-key-id abc123
name = "Switchboard"
base_url = "` + testGateway + `/v1"
wire_api = "responses"
experimental_bearer_token = "` + createdKey + `"
`
	assert.Equal(t, want, string(data), "model and model_provider must be top-level keys, before the first table")
}

// Unconfiguring removes our table only: the trusted project after it stays.
func TestCodexSettingsUnconfigureKeepsTheTrustedProjectAfterOurTable(t *testing.T) {
	h, _, path := newCodexHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	cfg := `model = "gpt-5"

[model_providers.switchboard]
name = "Switchboard"
base_url = "` + testGateway + `/v1"

[projects."/home/me/app"]
trust_level = "trusted"
`
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	w, _ := serve(t, h, http.MethodDelete, "127.0.0.1:5000", ``, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "model = \"gpt-5\"\n\n[projects.\"/home/me/app\"]\ntrust_level = \"trusted\"\n", string(data))
}

// A file whose strings or values are left open is refused (409) and kept:
// where its statements end cannot be told, so our lines could land inside
// the user's text.
func TestCodexSettingsRefuseAnUnterminatedFile(t *testing.T) {
	h, _, path := newCodexHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	for _, cfg := range []string{
		"developer_instructions = \"\"\"\nno end\n[model_providers.switchboard]\n",
		"notify = [\"say\",\n",
		"model = \"gpt-5\n",
		"this is not toml\n",
	} {
		require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
		for _, method := range []string{http.MethodPost, http.MethodDelete, http.MethodGet} {
			w, _ := serve(t, h, method, "127.0.0.1:5000", `{"model":"m","apiKey":"sk-x"}`, true)
			assert.Equal(t, http.StatusConflict, w.Code, "%s %q: %s", method, cfg, w.Body.String())
			assert.Contains(t, w.Body.String(), "invalid_settings_file")
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, cfg, string(data), "a refused file is left as it was")
	}
}
