package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Billing stopped: the edge stays ready for the gateway (its body says
// billing is degraded), every /v1 route keeps serving and GraphQL answers
// BILLING_UNAVAILABLE.
func TestBillingDownKeepsTheGatewayServing(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(4), upstreamtest.WithModels("gpt-4o-mini", "text-embedding-3-small"))

	coreCfg := nodetest.Config(t.TempDir())
	coreCfg.NATSURL = natsURL
	coreNode := nodetest.Start(t, coreCfg, node.RoleCore)

	billingCfg := nodetest.Config(t.TempDir())
	billingCfg.NATSURL = natsURL
	billingNode := nodetest.Start(t, billingCfg, node.RoleBilling)

	edgeCfg := nodetest.Config(t.TempDir())
	edgeCfg.CoreAddr = coreNode.Node.GRPCAddr()
	edgeCfg.BillingAddr = billingNode.Node.GRPCAddr()
	edge := nodetest.Start(t, edgeCfg, node.RoleEdge)
	edge.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "enabledModels": []string{"gpt-4o-mini", "text-embedding-3-small", "tts-1"}}})

	ready := edge.Do(t, http.MethodGet, "/readyz", nil)
	require.Equal(t, http.StatusOK, ready.Status, "%s", ready.Body)
	assert.NotContains(t, string(ready.Body), "degraded")

	billingNode.Stop()

	ready = edge.Do(t, http.MethodGet, "/readyz", nil)
	assert.Equal(t, http.StatusOK, ready.Status, "billing down does not take the gateway out: %s", ready.Body)
	assert.Contains(t, string(ready.Body), "billing: degraded")

	assert.ElementsMatch(t, []string{"openai/gpt-4o-mini", "openai/text-embedding-3-small", "openai/tts-1"}, edge.ModelIDs(t))
	chat := edge.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{
		"model": "openai/gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	assert.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
	emb := edge.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "openai/text-embedding-3-small", "input": "x"})
	assert.Equal(t, http.StatusOK, emb.Status, "%s", emb.Body)
	speech := edge.Do(t, http.MethodPost, "/v1/audio/speech", map[string]any{"model": "openai/tts-1", "input": "hello", "voice": "alloy"})
	assert.Equal(t, http.StatusOK, speech.Status, "%s", speech.Body)

	gql := edge.Do(t, http.MethodPost, "/graphql", map[string]any{"query": "{ prices { plan } }"})
	assert.Equal(t, http.StatusOK, gql.Status)
	assert.Contains(t, string(gql.Body), "BILLING_UNAVAILABLE", "%s", gql.Body)

	// Core down is another matter: the gateway cannot answer.
	coreNode.Stop()
	ready = edge.Do(t, http.MethodGet, "/readyz", nil)
	assert.Equal(t, http.StatusServiceUnavailable, ready.Status, "%s", ready.Body)
}

// SIGTERM to a core replica in split mode: a request in flight on it
// finishes during the drain, and its usage event is published before the
// process ends (core stops only after the gRPC server's graceful stop).
func TestCoreStopPublishesUsageOfRequestsFinishingDuringDrain(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	arrived := make(chan struct{}, 1)
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(4), upstreamtest.WithRequestHook(func(r upstreamtest.Request) {
		if r.Path == pathEmbed {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	}))
	coreCfg := nodetest.Config(t.TempDir())
	coreCfg.NATSURL = natsURL
	coreNode := nodetest.Start(t, coreCfg, node.RoleCore)
	edgeCfg := nodetest.Config(t.TempDir())
	edgeCfg.CoreAddr = coreNode.Node.GRPCAddr()
	edge := nodetest.Start(t, edgeCfg, node.RoleEdge)
	edge.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})

	up.Enqueue(pathEmbed, upstreamtest.SlowFirstByte(time.Second))
	done := make(chan nodetest.Response, 1)
	go func() {
		done <- edge.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "x"})
	}()
	<-arrived
	coreNode.Stop()
	r := <-done
	require.Equal(t, http.StatusOK, r.Status, "the request in flight finished during the drain: %s", r.Body)

	nc, err := spine.Connect(context.Background(), natsURL, "observer", nil)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream, err := js.Stream(context.Background(), spine.StreamUsage)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Msgs, "the usage event of the drained request was published")
}
