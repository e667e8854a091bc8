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

// A provider whose only connection had its refresh token refused: the
// requests that follow are told the connection needs a new login, not
// merely that there are no credentials, and the refused token is not sent
// again.
func TestRefreshRefusedLaterRequestsSayANewLoginIsNeeded(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t, tokenAnswer{
		status: http.StatusBadRequest,
		body:   `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`,
	})
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())

	first := embed(t, sb)
	assert.GreaterOrEqual(t, first.Status, 400, "%s", first.Body)
	require.Eventually(t, func() bool {
		return connection(t, sb, id)["needsRelogin"] == true
	}, 10*time.Second, 20*time.Millisecond)

	resp := embed(t, sb)
	require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
	e, _ := resp.JSON["error"].(map[string]any)
	assert.Equal(t, "no_credentials", e["code"], "%s", resp.Body)
	assert.Contains(t, e["message"], "need a new login", "%s", resp.Body)
	for _, secret := range []string{oauthOldAccess, oauthRefresh1} {
		assert.NotContains(t, string(first.Body)+string(resp.Body), secret)
	}
	assert.Len(t, tokens.grants(), 1, "no refresh of a refused token")
}
