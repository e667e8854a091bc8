package node_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// An upstream listing more models than a stored catalog holds (one NATS
// message): the fetch is recorded as failed, saying so, and listings go on
// without the connection's models at once, as for any failed fetch. It
// used to be retried by the worker, which fetched the whole list again
// each time, while every /v1/models waited its 5 seconds for a catalog
// that never came.
func TestUpstreamListingTooLargeToKeep(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	ids := make([]string, 40_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("org-%05d/some-rather-long-model-name-%05d", i, i)
	}
	up := upstreamtest.New(t, upstreamtest.WithModels(ids...))
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-big", "name": "big",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})

	r := sb.Admin(t, http.MethodGet, "/api/providers/"+id+"/models", nil)
	t.Logf("connection models: %d %.200s", r.Status, r.Body)
	assert.Equal(t, http.StatusBadGateway, r.Status, "the console is told the listing failed")
	assert.Contains(t, string(r.Body), "40000 models")

	for i := range 2 {
		start := time.Now()
		got := sb.ModelIDs(t)
		took := time.Since(start)
		t.Logf("listing %d: %d models in %s", i, len(got), took)
		assert.Less(t, took, 2*time.Second, "the listing does not wait for a catalog that cannot come")
	}
	require.LessOrEqual(t, up.Count("/v1/models"), 2, "the list is not fetched again and again")
}

// A fetch that fails while the connection's last list is still in force
// (the console's look at its models, or the scheduled refresh before the
// hour ends, meeting an upstream that answers 503 for a moment) says so to
// the console, but leaves the list in force until its hour ends: the
// connection's models stay in /v1/models, and their bare names routed.
func TestFailedFetchKeepsTheListInForce(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithModels("m1", "m2"), upstreamtest.WithEmbeddingDims(embedDims))
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-s", "name": "s",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	require.ElementsMatch(t, []string{"local/m1", "local/m2"}, sb.ModelIDs(t))

	up.SetDefault("/v1/models", upstreamtest.Status(http.StatusServiceUnavailable, `{"error":{"message":"busy"}}`))
	r := sb.Admin(t, http.MethodGet, "/api/providers/"+id+"/models", nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.Status, "the console is told the fetch failed: %s", r.Body)

	assert.ElementsMatch(t, []string{"local/m1", "local/m2"}, sb.ModelIDs(t), "the list in force is still listed")
	e := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "m1", "input": "x"})
	assert.Equal(t, http.StatusOK, e.Status, "a bare name of the list is still routed: %s", e.Body)

	up.SetDefault("/v1/models", upstreamtest.OK())
	r = sb.Admin(t, http.MethodGet, "/api/providers/"+id+"/models", nil)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}
