package spinetest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
)

// A cluster starts when a route port picked for it is taken before its
// member listens on it, as another test binary's socket takes one on a
// busy machine; here by a member of another test's cluster, which does not
// take in the members that reach it there. Before, the member could not
// listen and the cluster's start failed ten seconds on ("member 1 not
// ready"), its first member having joined the other cluster.
func TestStartClusterWhenARoutePortIsTakenMeanwhile(t *testing.T) {
	other := StartCluster(t, 3)
	taken := other.members[1].ClusterAddr().Port
	pick, picks := routePort, 0
	routePort = func(t testing.TB) int {
		// The second member's: the first, started before it, routes to it.
		if picks++; picks == 2 {
			return taken
		}
		return pick(t)
	}
	t.Cleanup(func() { routePort = pick })

	c := StartCluster(t, 3)
	for i := range c.Size() {
		assert.Equal(t, 2, c.members[i].NumRemotes(), "member %d's routes", i)
		assert.Equal(t, 2, other.members[i].NumRemotes(), "the other cluster's member %d's routes", i)
	}
	// Each cluster's JetStream holds replicas on its own members alone.
	for _, cl := range []*Cluster{c, other} {
		nc, err := nats.Connect(cl.URL(0))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, spine.EnsureBuckets(ctx, js, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3}))
	}
	var peers []string
	for _, m := range other.members {
		if p := m.JetStreamClusterPeers(); p != nil {
			peers = p
		}
	}
	assert.Len(t, peers, 3, "the other cluster's JetStream peers: %v", peers)
}
