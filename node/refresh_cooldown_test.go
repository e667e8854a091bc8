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

// A refresh that outlasts the request's wait for it (core's
// dispatch.RefreshWait, 15 s) leaves the connection cooling for the
// refused token; once the worker has stored the new token, that cooldown
// says nothing about the connection any more: the next request is served
// with the new token, not answered 503 credentials_cooling_down for the
// rest of the two minutes.
func TestRefreshedTokenEndsTheCooldownOfTheRefusedOne(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
	slow := make(chan struct{})
	tokens.gate = slow
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())

	resp := embed(t, sb)
	require.NotEqual(t, http.StatusOK, resp.Status, "the refresh did not finish in time: %s", resp.Body)
	close(slow)
	// The refresh is done once the worker's job is: the new token stored,
	// and then the refused one's cooldowns ended (two writes, some time
	// apart on a loaded machine).
	require.Eventually(t, func() bool {
		return sb.Metrics(t).Value("switchboard_jobs_total", "consumer", "token-refresh", "outcome", "processed") == 1
	}, 10*time.Second, 20*time.Millisecond, "the worker's refresh job is done")
	require.NotNil(t, connection(t, sb, id)["expiresAt"], "the worker stored the new token")

	resp = embed(t, sb)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	got := bearers(up, upstreamtest.PathEmbeddings)
	assert.Equal(t, "Bearer "+oauthNewAccess, got[len(got)-1], "served with the new token")
}
