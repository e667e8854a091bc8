package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// A connection still carrying the error of a refresh that failed long ago
// (its job's de-duplication window over): a request that has a new refresh
// queued waits for that refresh through writes that record no refresh
// outcome, a connection test here, and is answered with the new token.
func TestRefreshWaitOutlastsUnrelatedWritesOfAConnectionWithAnOldError(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
	gate := make(chan struct{})
	tokens.gate = gate
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())

	// The old failure, as a worker recorded it.
	conn, err := grpc.NewClient(sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	actx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+nodetest.AdminToken)
	rec, err := corev1.NewAdminClient(conn).StoreTokens(actx, &corev1.StoreTokensRequest{
		ConnectionId: id, Generation: 0, Error: "token refresh failed: token endpoint answered 503"})
	require.NoError(t, err)
	require.True(t, rec.GetStored())

	done := make(chan nodetest.Response, 1)
	go func() { done <- embed(t, sb) }()
	require.Eventually(t, func() bool { return len(tokens.grants()) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the request has a refresh under way")

	// A write that is no refresh's outcome, while the refresh runs.
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPost, "/api/providers/"+id+"/test", nil).Status)
	select {
	case resp := <-done:
		t.Fatalf("the request ended before its refresh did: %d %s", resp.Status, resp.Body)
	case <-time.After(time.Second):
	}
	close(gate)
	resp := <-done
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Equal(t, []string{"Bearer " + oauthOldAccess, "Bearer " + oauthNewAccess}, bearers(up, upstreamtest.PathEmbeddings))
}
