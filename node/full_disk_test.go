package node_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// A moment of full disk under the one-process service: requests answered
// meanwhile are recorded once the disk has room again, each once, and rolled
// up; the stores take writes again. Before, the usage stream refused every
// write for the life of the process after its first failed one, so usage
// went unrecorded (and the buffer, once full, dropped it) until a restart.
func TestUsageRecordedThroughAFullDisk(t *testing.T) {
	spinetest.SmallDisk(t, 400<<20, func(t *testing.T, dir string) {
		cfg := nodetest.Config(filepath.Join(dir, "data"))
		cfg.UsageMaxBytes = 16 << 20
		cfg.ResponsesMaxBytes = 8 << 20
		sb := nodetest.Start(t, cfg, node.AllRoles...)
		up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithAPIKey("sk-disk"))
		first := sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "disk", "apiKey": "sk-disk",
			"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
		embed := func() {
			t.Helper()
			r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "some words"})
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		}
		requests := func() float64 {
			stats := sb.Admin(t, http.MethodGet, pathUsageStats+"?period=today", nil)
			tot, _ := stats.JSON["totals"].(map[string]any)
			n, _ := tot["requests"].(float64)
			return n
		}
		for range 3 {
			embed()
		}
		require.Eventually(t, func() bool { return requests() == 3 }, 20*time.Second, 50*time.Millisecond)

		// Fill the disk and go on serving.
		free := spinetest.Fill(t, dir)
		// The last pages of the store's files have some room left: enough
		// events fill it.
		const total = 3 + 300
		for range total - 3 {
			embed()
		}
		time.Sleep(3 * time.Second)
		require.Less(t, requests(), float64(total), "all recorded on a full disk")
		m := sb.Metrics(t)
		assert.Equal(t, 1.0, m.Value("switchboard_nats_store_failing"))
		assert.Positive(t, m.Value("switchboard_usage_events_buffered"))

		free()
		require.Eventually(t, func() bool { return requests() == total }, 90*time.Second, 200*time.Millisecond,
			"the events of the full disk are recorded once it has room")
		assert.Len(t, usageLog(t, sb), total, "each event once")
		m = sb.Metrics(t)
		assert.Equal(t, 0.0, m.Value("switchboard_nats_store_failing"))
		assert.Equal(t, 1.0, m.Value("switchboard_nats_store_restarts_total"))

		// The buckets take writes again, and core sees them: a new
		// connection answers once the first is gone.
		after := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithAPIKey("sk-after"))
		sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "after", "apiKey": "sk-after",
			"providerSpecificData": map[string]any{"baseUrl": after.URL()}})
		require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/providers/"+first, nil).Status)
		require.Eventually(t, func() bool {
			embed()
			return after.Count(pathEmbed) > 0
		}, 10*time.Second, 100*time.Millisecond, "the new connection is used")
		served := up.Count(pathEmbed) + after.Count(pathEmbed)
		require.Eventually(t, func() bool { return requests() == float64(served) }, 30*time.Second, 100*time.Millisecond,
			"every request served is recorded")
	})
}
