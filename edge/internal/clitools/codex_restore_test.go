package clitools

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ollamaCodexConfig = "model = \"qwen3-coder\"\nmodel_provider = \"ollama\"\n\n[model_providers.ollama]\nname = \"Ollama\"\nbase_url = \"http://localhost:11434/v1\"\n"

// A user points Codex at the gateway (POST, twice) and later back
// (DELETE). Before, Codex used provider "ollama" with model "qwen3-coder";
// after the round trip it does again, where it was left asking its default
// provider (OpenAI) for the gateway's model id "local/llama3".
func TestCodexUnconfigureRestoresTheUsersChoice(t *testing.T) {
	h, _, path := newCodexHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(ollamaCodexConfig), 0o600))

	for _, model := range []string{"local/llama3", "local/qwen3"} {
		w, st := serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"`+model+`"}`, true)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		assert.Equal(t, true, st["configured"])
		assert.Equal(t, model, st["model"])
	}
	w, _ := serve(t, h, http.MethodDelete, "127.0.0.1:5000", "", true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, ollamaCodexConfig, string(after), "the user's model and provider are back, the file as it was")
}

// A user who chose another provider by hand after configuring keeps it, and
// the model that goes with it, when the gateway's entry is removed.
func TestCodexUnconfigureKeepsAProviderChosenSince(t *testing.T) {
	h, _, path := newCodexHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(ollamaCodexConfig), 0o600))
	w, _ := serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"local/llama3"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())

	d := parseTOML([]byte(readCodexConfig(t, path)))
	d.setTop("model_provider", `"lmstudio"`)
	d.setTop("model", `"gemma-3"`)
	require.NoError(t, os.WriteFile(path, d.bytes(), 0o600))
	w, _ = serve(t, h, http.MethodDelete, "127.0.0.1:5000", "", true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())

	after := parseTOML([]byte(readCodexConfig(t, path)))
	m, _ := after.topValue("model")
	p, _ := after.topValue("model_provider")
	assert.Equal(t, `"gemma-3"`, m)
	assert.Equal(t, `"lmstudio"`, p)
	_, ours := after.tableValue(codexTable, "name")
	assert.False(t, ours, "the gateway's entry is gone")
}
