package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The walking skeleton end to end: connections created through the admin
// API, a static provider listed, a compatible upstream's catalog fetched by a
// worker through the job queue, and all of it kept across a restart.
func TestServeListsModelsAndKeepsStateAcrossRestart(t *testing.T) {
	dataDir := t.TempDir()
	up := upstreamtest.New(t, upstreamtest.WithModels("llama-3-8b", "nomic-embed-text"), upstreamtest.WithAPIKey("up-secret"))

	sb := nodetest.Serve(t, dataDir)
	require.Empty(t, sb.ModelIDs(t), "a fresh instance lists nothing")

	sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-local", "name": "local", "apiKey": "up-secret",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"},
	})
	sb.CreateConnection(t, map[string]any{
		"provider": "openai", "name": "openai", "apiKey": "sk-upstream",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini", "text-embedding-3-small"}},
	})

	ids := sb.ModelIDs(t)
	assert.ElementsMatch(t, []string{
		"local/llama-3-8b", "local/nomic-embed-text",
		"openai/gpt-4o-mini", "openai/text-embedding-3-small",
	}, ids)

	// The worker fetched the catalog with the connection's key and marked
	// the fetch so another instance would not recurse.
	require.Equal(t, 1, up.Count("/v1/models"))
	req := up.Requests()[0]
	assert.Equal(t, "Bearer up-secret", req.Header.Get("Authorization"))
	assert.Equal(t, "1", req.Header.Get("X-Switchboard-Catalog-Fetch"))

	// Kinds are read from the catalog or guessed from the id.
	resp := sb.Do(t, http.MethodGet, "/v1/models", nil)
	kinds := map[string]string{}
	for _, d := range resp.JSON["data"].([]any) {
		m := d.(map[string]any)
		kinds[m["id"].(string)] = m["kind"].(string)
		assert.Equal(t, "model", m["object"])
	}
	assert.Equal(t, "embedding", kinds["local/nomic-embed-text"])
	assert.Equal(t, "llm", kinds["local/llama-3-8b"])
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.NotEmpty(t, resp.Header.Get("X-Switchboard-Overhead-Us"))

	// The official client parses the listing, with a key of this machine.
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "sdk"})
	require.Equal(t, http.StatusCreated, key.Status, "%s", key.Body)
	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key.JSON["key"].(string)), option.WithMaxRetries(0))
	page, err := client.Models.List(context.Background())
	require.NoError(t, err)
	var sdkIDs []string
	for _, m := range page.Data {
		sdkIDs = append(sdkIDs, m.ID)
		assert.NotEmpty(t, m.OwnedBy)
		assert.True(t, m.JSON.Created.Valid(), "%s: OpenAI's model object has created: %s", m.ID, m.RawJSON())
		assert.True(t, m.JSON.Object.Valid(), m.ID)
	}
	assert.ElementsMatch(t, ids, sdkIDs)

	// Restart on the same data directory: connections and the catalog are
	// still there, so no new fetch is needed.
	sb.Stop()
	sb = nodetest.Serve(t, dataDir)
	assert.ElementsMatch(t, ids, sb.ModelIDs(t))
	assert.Equal(t, 1, up.Count("/v1/models"), "the stored catalog is reused after a restart")
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	require.Equal(t, http.StatusOK, conns.Status)
	assert.Len(t, conns.JSON["connections"], 2)
}

// The same flow with every role in its own process-like instance sharing
// one NATS server, as a scaled-out deployment runs.
func TestSplitModeListsModels(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	up := upstreamtest.New(t, upstreamtest.WithModels("qwen2.5-coder"))

	coreCfg := nodetest.Config(t.TempDir())
	coreCfg.NATSURL = natsURL
	coreCfg.SecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	coreNode := nodetest.Start(t, coreCfg, node.RoleCore)
	coreAddr := coreNode.Node.GRPCAddr()

	workerCfg := nodetest.Config(t.TempDir())
	workerCfg.NATSURL = natsURL
	workerCfg.CoreAddr = coreAddr
	nodetest.Start(t, workerCfg, node.RoleWorker)

	billingCfg := nodetest.Config(t.TempDir())
	billingCfg.NATSURL = natsURL
	billingNode := nodetest.Start(t, billingCfg, node.RoleBilling)

	edgeCfg := nodetest.Config(t.TempDir())
	edgeCfg.CoreAddr = coreAddr
	edgeCfg.BillingAddr = billingNode.Node.GRPCAddr()
	edgeNode := nodetest.Start(t, edgeCfg, node.RoleEdge)

	edgeNode.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-lab", "name": "lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})
	assert.Equal(t, []string{"openai-compatible-lab/qwen2.5-coder"}, edgeNode.ModelIDs(t))
	assert.Equal(t, 1, up.Count("/v1/models"))
	ready := edgeNode.Do(t, http.MethodGet, "/readyz", nil)
	assert.Equal(t, http.StatusOK, ready.Status, "%s", ready.Body)
	// The edge reaches billing over the network too: without Stripe it says so.
	gql := edgeNode.Do(t, http.MethodPost, "/graphql", map[string]any{"query": "{ prices { plan } }"})
	assert.Equal(t, http.StatusOK, gql.Status)
	assert.Contains(t, string(gql.Body), "BILLING_NOT_CONFIGURED")
}

// Interface 4.2 rule 5: a failing or silent upstream leaves its models out
// and the listing still answers.
func TestListingSurvivesFailingUpstreams(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	broken := upstreamtest.New(t)
	broken.SetDefault("/v1/models", upstreamtest.Status(http.StatusInternalServerError, `{"error":"boom"}`))
	silent := upstreamtest.New(t)
	silent.SetDefault("/v1/models", upstreamtest.Hang())
	healthy := upstreamtest.New(t, upstreamtest.WithModels("ok-model"))

	for name, up := range map[string]*upstreamtest.Server{"broken": broken, "silent": silent, "healthy": healthy} {
		sb.CreateConnection(t, map[string]any{
			"provider": "openai-compatible-" + name, "name": name,
			"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": name},
		})
	}
	start := time.Now()
	ids := sb.ModelIDs(t)
	assert.Equal(t, []string{"healthy/ok-model"}, ids)
	// The listing waited for the silent upstream at most the 5 s fetch
	// limit (plus scheduling slack), never the client's own timeout.
	assert.Less(t, time.Since(start), 15*time.Second)
	assert.Equal(t, 1, broken.Count("/v1/models"))
	assert.Equal(t, 1, silent.Count("/v1/models"))
}

// Interface 4.2 rule 6 and the loop-breaker of decisions.md: cross-instance
// connections and requests from another instance's fetch never fetch.
func TestNoDynamicFetchAcrossInstances(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithModels("m1"))
	sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-0b4f4b9e-8a52-4c3c-9d3e-2f1f7f0e6a11", "name": "peer",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})
	assert.Empty(t, sb.ModelIDs(t))
	assert.Zero(t, up.Count("/v1/models"), "a UUID-suffix connection is never fetched")

	other := upstreamtest.New(t, upstreamtest.WithModels("m2"))
	sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-other", "name": "other",
		"providerSpecificData": map[string]any{"baseUrl": other.URL()},
	})
	assert.Empty(t, sb.ModelIDs(t, "X-Switchboard-Catalog-Fetch", "1"))
	assert.Zero(t, other.Count("/v1/models"), "a fetch from another instance triggers no fetch")
	assert.Equal(t, []string{"openai-compatible-other/m2"}, sb.ModelIDs(t))
}

// Two instances pointing at each other answer without recursing.
func TestTwoInstancesPointingAtEachOther(t *testing.T) {
	a := nodetest.Serve(t, t.TempDir())
	b := nodetest.Serve(t, t.TempDir())
	a.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-b", "name": "b",
		"providerSpecificData": map[string]any{"baseUrl": b.BaseURL + "/v1"},
	})
	b.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-a", "name": "a",
		"providerSpecificData": map[string]any{"baseUrl": a.BaseURL + "/v1"},
	})
	assert.Empty(t, a.ModelIDs(t))
	assert.Empty(t, b.ModelIDs(t))
}

// A start that fails part-way closes what it opened and reports the error.
func TestStartFailureClosesCleanly(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.SecretKey = "not base64 !!"
	n, err := node.Start(context.Background(), cfg, nodetest.Logger(), node.AllRoles...)
	require.Error(t, err)
	assert.Nil(t, n)
	// The data directory's NATS store was released: a new start succeeds.
	cfg.SecretKey = ""
	nodetest.Start(t, cfg, node.AllRoles...)
}

// A graceful stop (SIGTERM) lets in-flight requests finish before the
// process ends.
func TestGracefulStopDrainsInFlightRequests(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(4), upstreamtest.WithRequestHook(func(upstreamtest.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
	}))
	up.Enqueue("/v1/embeddings", upstreamtest.SlowFirstByte(time.Second))
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})

	done := make(chan nodetest.Response, 1)
	go func() {
		done <- sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "openai/text-embedding-3-small", "input": "x"})
	}()
	<-arrived
	stopped := make(chan struct{})
	go func() { sb.Stop(); close(stopped) }()
	r := <-done
	assert.Equal(t, http.StatusOK, r.Status, "the in-flight request finished: %s", r.Body)
	<-stopped
}
