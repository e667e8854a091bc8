package node_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The request path keeps what it can ready between changes (a machine's
// connections in order, an API key's lookup state); every change made
// through the admin API is seen by the very next request: a connection
// disabled or added, an alias set or moved, a key revoked.
func TestRequestsSeeStateChangesAtOnce(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	first, second := upstreamtest.New(t), upstreamtest.New(t)
	a := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "a",
		"providerSpecificData": map[string]any{"baseUrl": first.URL(), "prefix": "local"}})
	created := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "changes"})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	key, keyID := created.JSON["key"].(string), created.JSON["id"].(string)
	chat := func(model string) nodetest.Response {
		return sb.Do(t, http.MethodPost, pathChat, map[string]any{
			"model": model, "messages": []map[string]any{{"role": "user", "content": "hi"}},
		}, "Authorization", "Bearer "+key)
	}
	upstreamModel := func(s *upstreamtest.Server) string {
		reqs := s.Requests()
		require.NotEmpty(t, reqs)
		var body struct{ Model string }
		require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &body))
		return body.Model
	}

	r := chat("local/gpt-4o-mini")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, 1, first.Count(pathChat))

	patch := sb.Admin(t, http.MethodPatch, "/api/providers/"+a, map[string]any{"isActive": false})
	require.Equal(t, http.StatusOK, patch.Status, "%s", patch.Body)
	r = chat("local/gpt-4o-mini")
	assert.Equal(t, http.StatusBadRequest, r.Status, "a disabled connection: %s", r.Body)
	assert.Equal(t, "no_credentials", errorCode(r))
	assert.Equal(t, 1, first.Count(pathChat), "the disabled connection is not called")

	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "b",
		"providerSpecificData": map[string]any{"baseUrl": second.URL(), "prefix": "local"}})
	r = chat("local/gpt-4o-mini")
	require.Equal(t, http.StatusOK, r.Status, "an added connection: %s", r.Body)
	assert.Equal(t, 1, second.Count(pathChat))

	aliases := func(to string) {
		t.Helper()
		r := sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": map[string]string{"fast": to}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	aliases("local/gpt-4o-mini")
	r = chat("fast")
	require.Equal(t, http.StatusOK, r.Status, "a new alias: %s", r.Body)
	assert.Equal(t, "gpt-4o-mini", upstreamModel(second))
	aliases("local/gpt-4.1-nano")
	r = chat("fast")
	require.Equal(t, http.StatusOK, r.Status, "a moved alias: %s", r.Body)
	assert.Equal(t, "gpt-4.1-nano", upstreamModel(second))

	del := sb.Admin(t, http.MethodDelete, "/api/keys/"+keyID, nil)
	require.Equal(t, http.StatusOK, del.Status, "%s", del.Body)
	r = chat("local/gpt-4o-mini")
	assert.Equal(t, http.StatusUnauthorized, r.Status, "a revoked key: %s", r.Body)
	assert.Equal(t, 3, second.Count(pathChat), "nothing reaches the upstream with a revoked key")
}
