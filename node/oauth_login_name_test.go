package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// A login names its connection within the 200 characters every other way
// of naming one allows (POST /api/providers), and a name past them is
// refused before the provider is asked for anything.
func TestOAuthLoginNameIsBoundedLikeAConnectionsName(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeAccess))
	f := newFakeAuthServer(t, pollOK)
	sb := serveWithOAuth(t, f, up.URL())

	long := strings.Repeat("n", 201)
	create := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "kimi", "name": long, "apiKey": "sk-x"})
	require.Equal(t, http.StatusBadRequest, create.Status, "%s", create.Body)

	device := sb.Admin(t, http.MethodPost, "/api/oauth/kimi/device-code", map[string]any{"name": long})
	assert.Equal(t, http.StatusBadRequest, device.Status, "%s", device.Body)
	assert.Contains(t, string(device.Body), "at most 200 characters")
	authorize := sb.Admin(t, http.MethodPost, "/api/oauth/codex/authorize", map[string]any{"name": long})
	assert.Equal(t, http.StatusBadRequest, authorize.Status, "%s", authorize.Body)
	assert.Contains(t, string(authorize.Body), "at most 200 characters")
	f.mu.Lock()
	asked := f.n
	f.mu.Unlock()
	assert.Zero(t, asked, "the provider was asked for a device code for a login refused")

	// 200 characters (not bytes) are fine.
	name := strings.Repeat("é", 200)
	start := sb.Admin(t, http.MethodPost, "/api/oauth/kimi/device-code", map[string]any{"name": name})
	require.Equal(t, http.StatusOK, start.Status, "%s", start.Body)
	p := poll(t, sb, "kimi", start.JSON["flowId"].(string))
	require.Equal(t, "complete", p.JSON["status"], "%s", p.Body)
	assert.Equal(t, name, p.JSON["connection"].(map[string]any)["name"])
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Len(t, conns.JSON["connections"], 1, "only the login within the bound made a connection")
}
