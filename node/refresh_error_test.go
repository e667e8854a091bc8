package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// An OAuth connection whose refresh failed says why, and since when, in
// the admin API's view of it (refreshError, refreshErrorAt), listed or
// read alone: whether the failure made it need a new login or not, and
// without any token in it, an endpoint that echoes the refresh token as
// its error code included.
func TestRefreshFailureIsShownOnTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name         string
		answer       tokenAnswer
		needsRelogin bool
		says         []string
	}{
		{"refused", tokenAnswer{status: http.StatusBadRequest, body: `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`},
			true, []string{"invalid_grant", "sign in again"}},
		{"failed", tokenAnswer{status: http.StatusUnauthorized, body: `{"error":"invalid_client"}`},
			false, []string{"401", "invalid_client"}},
		{"token echoed", tokenAnswer{status: http.StatusBadRequest, body: `{"error":"` + oauthRefresh1 + `"}`},
			false, []string{"400"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
			tokens := newFakeTokenEndpoint(t, tc.answer)
			sb := nodetest.Serve(t, t.TempDir())
			id := createOAuthConnection(t, sb, up.URL(), tokens.URL())
			before := time.Now()
			embed(t, sb)

			var c map[string]any
			require.Eventually(t, func() bool {
				c = connection(t, sb, id)
				return c["refreshError"] != nil && c["refreshError"] != ""
			}, 10*time.Second, 20*time.Millisecond, "the failure is recorded on the connection")
			assert.Equal(t, tc.needsRelogin, c["needsRelogin"])
			for _, s := range tc.says {
				assert.Contains(t, c["refreshError"], s)
			}
			at, err := time.Parse(time.RFC3339Nano, c["refreshErrorAt"].(string))
			require.NoError(t, err, "%v", c)
			assert.WithinDuration(t, before, at, 10*time.Second)

			list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
			require.Equal(t, http.StatusOK, list.Status, "%s", list.Body)
			listed := list.JSON["connections"].([]any)[0].(map[string]any)
			assert.Equal(t, c["refreshError"], listed["refreshError"])
			for _, secret := range []string{oauthOldAccess, oauthRefresh1} {
				assert.NotContains(t, string(list.Body), secret)
			}
		})
	}
}

// A new login clears the failure it mends.
func TestLoginClearsTheRefreshFailure(t *testing.T) {
	const renewed = "at-relogin-77d2a1"
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(renewed))
	f := newFakeAuthServer(t, pollOK)
	f.refuseRefresh = true
	sb := serveWithOAuth(t, f, up.URL())
	first := poll(t, sb, "kimi", startDevice(t, sb, "kimi"))
	require.Equal(t, "complete", first.JSON["status"], "%s", first.Body)
	id := first.JSON["connection"].(map[string]any)["id"].(string)
	assert.Empty(t, first.JSON["connection"].(map[string]any)["refreshError"])
	awaitRelogin(t, sb, "kimi/kimi-for-coding", id)
	assert.Contains(t, connectionWithout(t, sb, id)["refreshError"], "invalid_grant")

	f.mu.Lock()
	f.access = renewed
	f.mu.Unlock()
	again := poll(t, sb, "kimi", startDevice(t, sb, "kimi"))
	require.Equal(t, "complete", again.JSON["status"], "%s", again.Body)
	c := connectionWithout(t, sb, id)
	assert.Empty(t, c["refreshError"])
	assert.Nil(t, c["refreshErrorAt"])
}
