package node_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// An operator whose upstream cannot be reached gets a 502 "no upstream
// answered" and a cooldown; the cooldown's message says why (here, the
// connection was refused), as the connection test does.
func TestCooldownNetworkFailureSaysWhy(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens: connection refused
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": "http://" + addr + "/v1", "enabledModels": []string{"gpt-4o-mini"}}})
	r := sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "openai/gpt-4o-mini",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	require.Equal(t, http.StatusBadGateway, r.Status, "%s", r.Body)
	t.Logf("client: %s", r.Body)
	cds := sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"].([]any)
	require.Len(t, cds, 1)
	msg := cds[0].(map[string]any)["message"].(string)
	t.Logf("cooldown message: %q", msg)
	assert.Contains(t, msg, "refused", "the cooldown names the cause")
}
