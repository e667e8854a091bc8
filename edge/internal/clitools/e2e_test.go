package clitools_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Through the running gateway, from loopback: the admin token is checked by
// core, and the key POST creates is a working gateway key.
func TestClaudeSettingsThroughTheGateway(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.CLIHomeDir = t.TempDir()
	cfg.RequireAPIKey = true
	sb := nodetest.Start(t, cfg, node.RoleCore, node.RoleEdge, node.RoleWorker)
	const path = "/api/cli-tools/claude-settings"

	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, path, nil).Status, "admin token required")
	get := sb.Admin(t, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, get.Status, "%s", get.Body)
	assert.Equal(t, false, get.JSON["configured"])
	assert.Equal(t, cfg.PublicURL, get.JSON["gatewayUrl"])

	post := sb.Admin(t, http.MethodPost, path, map[string]any{"model": "openai/gpt-4o"})
	require.Equal(t, http.StatusOK, post.Status, "%s", post.Body)
	assert.Equal(t, true, post.JSON["configured"])
	assert.Equal(t, true, post.JSON["keyCreated"])

	data, err := os.ReadFile(filepath.Join(cfg.CLIHomeDir, ".claude", "settings.json"))
	require.NoError(t, err)
	var settings struct {
		Env map[string]string `json:"env"`
	}
	require.NoError(t, json.Unmarshal(data, &settings))
	assert.Equal(t, cfg.PublicURL, settings.Env["ANTHROPIC_BASE_URL"])
	key := settings.Env["ANTHROPIC_AUTH_TOKEN"]
	require.NotEmpty(t, key)
	assert.NotContains(t, string(post.Body), key, "the key is only in the file")
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/v1/models", nil).Status)
	assert.Equal(t, http.StatusOK, sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+key).Status,
		"the written key works")

	del := sb.Admin(t, http.MethodDelete, path, nil)
	require.Equal(t, http.StatusOK, del.Status, "%s", del.Body)
	assert.Equal(t, false, del.JSON["configured"])
}
