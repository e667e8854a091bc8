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
