package tokenrefresh

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// connectionsAdmin is core's admin API for any number of OAuth
// connections, each refreshed at tokenURL(id), each store taken.
type connectionsAdmin struct {
	tokenURL func(id string) string
	mu       sync.Mutex
	stored   map[string]int
}

var _ Admin = (*connectionsAdmin)(nil)

func (a *connectionsAdmin) GetConnectionCredentials(_ context.Context, in *corev1.GetConnectionCredentialsRequest, _ ...grpc.CallOption) (*corev1.GetConnectionCredentialsResponse, error) {
	return &corev1.GetConnectionCredentialsResponse{
		Connection: &corev1.Connection{
			Id: in.GetConnectionId(), MachineId: machineID, Provider: "openai-compatible-oauth", AuthType: "oauth",
			ProviderSpecificData: &corev1.ProviderSpecificData{},
		},
		AccessToken:  oldAccess,
		RefreshToken: oldRefresh,
		TokenUrl:     a.tokenURL(in.GetConnectionId()),
		ClientId:     "cid",
		Generation:   3,
	}, nil
}

func (a *connectionsAdmin) StoreTokens(_ context.Context, in *corev1.StoreTokensRequest, _ ...grpc.CallOption) (*corev1.StoreTokensResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stored[in.GetConnectionId()]++
	return &corev1.StoreTokensResponse{Generation: 4, Stored: true}, nil
}

func (a *connectionsAdmin) storedFor(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stored[id]
}

// A refresh waits only for the refreshes of its own connection: while one
// connection's token endpoint takes its time to answer (a grant is given
// up to GrantTimeout), the refreshes of every other connection in the same
// worker go on, and nothing is kept of a connection once its refreshes
// are done. Before, connections shared 64 turns by a hash of their key,
// and one whose key fell on the slow connection's turn waited for its
// grant.
func TestTokenRefreshWaitsForNoOtherConnection(t *testing.T) {
	tokens := `{"access_token":"` + newAccess + `","refresh_token":"` + newRefresh + `","expires_in":3600}`
	slow := newTokenServer(t, 200, tokens)
	release := make(chan struct{})
	slow.setHook(func() { <-release })
	var answered sync.Once
	answer := func() { answered.Do(func() { close(release) }) }
	t.Cleanup(answer) // before the server closes, which waits for it
	fast := newTokenServer(t, 200, tokens)
	admin := &connectionsAdmin{stored: map[string]int{}, tokenURL: func(id string) string {
		if id == "slow" {
			return slow.URL + "/token"
		}
		return fast.URL + "/token"
	}}
	r, _ := newRefresher(admin)
	refresh := func(ctx context.Context, id string) error {
		return r.Handle(ctx, &busv1.TokenRefreshJob{MachineId: machineID, ConnectionId: id, Generation: 3})
	}

	slowDone := make(chan error, 1)
	go func() { slowDone <- refresh(context.Background(), "slow") }()
	require.Eventually(t, func() bool { return len(slow.received()) == 1 }, 10*time.Second, time.Millisecond,
		"the slow connection's grant is sent")
	// Enough connections that, sharing 64 turns, some would share the
	// slow one's.
	const others = 500
	for i := range others {
		id := fmt.Sprintf("conn-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := refresh(ctx, id)
		cancel()
		require.NoError(t, err, "%s waited for the slow connection's grant", id)
		require.Equal(t, 1, admin.storedFor(id), id)
	}
	assert.Zero(t, admin.storedFor("slow"), "the slow grant still runs")
	answer()
	require.NoError(t, <-slowDone)
	assert.Equal(t, 1, admin.storedFor("slow"))
	assert.Empty(t, r.turns, "turns of connections with no refresh running")
}
