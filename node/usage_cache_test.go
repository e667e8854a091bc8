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

// Prompt cache writes an Anthropic upstream reports are recorded on the
// usage event (cache_write_tokens), beside the cache reads, and summed by
// the roll-up into the usage stats and shown in the request log.
func TestUsageRecordsCacheWriteTokens(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithPromptCache(7, 3))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "a", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	key := gatewayKey(t, sb)
	for _, stream := range []bool{false, true} {
		r, raw, _ := postMessages(t, sb, key, messagesBody("claude/claude-sonnet-4-6", "cache me", stream))
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	}

	var logged []loggedEvent
	require.Eventually(t, func() bool { logged = usageLog(t, sb); return len(logged) == 2 }, 10*time.Second, 20*time.Millisecond)
	for _, l := range logged {
		assert.EqualValues(t, 7, l.ev.GetCacheWriteTokens(), "streamed or not")
		assert.EqualValues(t, 3, l.ev.GetCachedTokens())
	}

	var stats nodetest.Response
	require.Eventually(t, func() bool {
		stats = sb.Admin(t, http.MethodGet, pathUsageStats+"?period=today", nil)
		tot, _ := stats.JSON["totals"].(map[string]any)
		return stats.Status == http.StatusOK && tot["requests"] == float64(2)
	}, 20*time.Second, 50*time.Millisecond, "the worker rolls the events up")
	tot := stats.JSON["totals"].(map[string]any)
	assert.Equal(t, float64(14), tot["cacheWriteTokens"], "%s", stats.Body)
	assert.Equal(t, float64(6), tot["cachedTokens"])

	reqs := sb.Admin(t, http.MethodGet, pathRequests, nil)
	require.Equal(t, http.StatusOK, reqs.Status, "%s", reqs.Body)
	list, _ := reqs.JSON["requests"].([]any)
	require.Len(t, list, 2, "%s", reqs.Body)
	assert.Equal(t, float64(7), list[0].(map[string]any)["cacheWriteTokens"])
}
