package node_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Two `serve` on one data directory: the second refuses to start, naming
// the directory and the holder, before touching the store; the first keeps
// serving and its state survives a restart.
func TestSecondServeOnOneDataDirIsRefused(t *testing.T) {
	dataDir := t.TempDir()
	first := nodetest.Serve(t, dataDir)
	first.CreateConnection(t, map[string]any{
		"provider": "openai", "name": "openai", "apiKey": "sk-upstream",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini"}},
	})

	cfg := nodetest.Config(dataDir)
	second, err := node.Start(context.Background(), cfg, nodetest.Logger(), node.AllRoles...)
	require.ErrorIs(t, err, node.ErrDataDirInUse)
	assert.Nil(t, second)
	abs, _ := filepath.Abs(dataDir)
	assert.Contains(t, err.Error(), abs, "the message names the directory")
	assert.Contains(t, err.Error(), "pid "+strconv.Itoa(os.Getpid()), "the message names the holder")

	// The first keeps serving, reads and writes.
	assert.Equal(t, []string{"openai/gpt-4o-mini"}, first.ModelIDs(t))
	first.CreateConnection(t, map[string]any{
		"provider": "anthropic", "name": "anthropic", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"enabledModels": []string{"claude-3-5-haiku"}},
	})

	// Its state survives a restart; the directory is free again once it
	// stopped.
	first.Stop()
	again := nodetest.Serve(t, dataDir)
	conns := again.Admin(t, http.MethodGet, "/api/providers", nil)
	require.Equal(t, http.StatusOK, conns.Status)
	assert.Len(t, conns.JSON["connections"], 2)
	assert.ElementsMatch(t, []string{"openai/gpt-4o-mini", "anthropic/claude-3-5-haiku"}, again.ModelIDs(t))
}
