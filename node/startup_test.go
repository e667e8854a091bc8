package node_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Two cores, two workers, billing and an edge started at once, before the
// three-node NATS cluster they use is up and before any core listens: every
// role waits for what it needs and comes up, and the deployment serves.
func TestRolesStartTogetherOnAFreshCluster(t *testing.T) {
	cluster := nodetest.NewNATSCluster(t, 3)
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithModels("qwen2.5-coder"))
	coreAddrs := []string{fmt.Sprintf("127.0.0.1:%d", nodetest.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", nodetest.FreePort(t))}
	billingAddr := fmt.Sprintf("127.0.0.1:%d", nodetest.FreePort(t))

	type process struct {
		cfg   config.Config
		roles []node.Role
	}
	split := func(roles ...node.Role) process {
		cfg := nodetest.Config(t.TempDir())
		cfg.NATSURL = cluster.URLs()
		cfg.NATSReplica = 3
		cfg.SecretKey = testSecretKey
		cfg.CoreAddr = strings.Join(coreAddrs, ",")
		cfg.BillingAddr = billingAddr
		return process{cfg: cfg, roles: roles}
	}
	var procs []process
	for _, addr := range coreAddrs {
		p := split(node.RoleCore)
		p.cfg.GRPCAddr = addr
		procs = append(procs, p)
	}
	procs = append(procs, split(node.RoleWorker), split(node.RoleWorker))
	billing := split(node.RoleBilling)
	billing.cfg.GRPCAddr = billingAddr
	procs = append(procs, billing, split(node.RoleEdge))

	nodes := make([]*node.Node, len(procs))
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			nodes[i], errs[i] = node.Start(ctx, p.cfg, nodetest.Logger(), p.roles...)
		}()
	}
	// The cluster comes up after the roles started waiting for it.
	cluster.Start()
	wg.Wait()
	var edge *nodetest.Instance
	for i, p := range procs {
		if !assert.NoError(t, errs[i], "%v", p.roles) {
			continue
		}
		in := nodetest.Run(t, nodes[i], p.cfg, p.roles...)
		if p.roles[0] == node.RoleEdge {
			edge = in
		}
	}
	require.NotNil(t, edge)

	require.Eventually(t, func() bool {
		return edge.Do(t, http.MethodGet, "/readyz", nil).Status == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the edge becomes ready")
	edge.CreateConnection(t, map[string]any{"provider": "openai-compatible-lab", "name": "lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	// A worker fetches the catalog through the job queue. The listing may
	// be answered by the other core before its mirror has the new
	// connection (its watcher's lag, long on a loaded machine with three
	// replicas syncing every write), or after its 5-second wait for the
	// job: it shows the models once both are done.
	want := []string{"openai-compatible-lab/qwen2.5-coder"}
	assert.Eventually(t, func() bool { return slices.Equal(edge.ModelIDs(t), want) }, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, want, edge.ModelIDs(t))
	r := edge.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "openai-compatible-lab/qwen2.5-coder", "input": "x"})
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	// Both cores agree on the default machine: usage of the request shows in
	// its stats whichever core answers.
	require.Eventually(t, func() bool { return rolledUp(t, edge) == 1 }, 30*time.Second, 50*time.Millisecond)
}
