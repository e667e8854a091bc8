package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The admin token is taken with the Bearer scheme in any case (RFC 9110
// makes schemes case-insensitive), on the admin API, the billing admin
// routes and /metrics alike, as API keys are on the gateway routes.
func TestAdminTokenSchemeIsCaseInsensitive(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
		t.Run(scheme, func(t *testing.T) {
			auth := []string{"Authorization", scheme + " " + nodetest.AdminToken}
			r := sb.Do(t, http.MethodGet, "/api/settings", nil, auth...)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			r = sb.Do(t, http.MethodGet, "/metrics", nil, auth...)
			assert.Equal(t, http.StatusOK, r.Status, "/metrics: %.300s", r.Body)
			r = sb.Do(t, http.MethodGet, "/api/billing/dead-letters", nil, auth...)
			assert.NotEqual(t, http.StatusUnauthorized, r.Status, "billing admin: %s", r.Body)
			assert.NotEqual(t, "invalid_admin_token", errorCode(r), "billing admin")

			// A wrong token is refused whatever the scheme's case.
			r = sb.Do(t, http.MethodGet, "/api/settings", nil, "Authorization", scheme+" not-the-admin-token")
			assert.Equal(t, http.StatusUnauthorized, r.Status)
			assert.Equal(t, "invalid_admin_token", errorCode(r))
		})
	}
}
