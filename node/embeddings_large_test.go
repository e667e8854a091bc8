package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// The largest float answer OpenAI's bounds allow (2,048 inputs of 3,072
// dimensions, about 100 MiB of JSON) is more than a call between the
// gateway's roles carries: the client is told so, with what to ask for
// instead, in a 502 (not a 413 about its own small request), and the
// usage the upstream billed is recorded as a failure, not as served.
func TestEmbeddingsAnswerTooLargeToRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100 MiB answer")
	}
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(3072))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-o",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	inputs := make([]string, 2048)
	for i := range inputs {
		inputs[i] = "text " + strings.Repeat("x", i%7)
	}
	r := sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "openai/text-embedding-3-large", "input": inputs})
	require.Equal(t, http.StatusBadGateway, r.Status, "%.300s", r.Body)
	assert.Contains(t, string(r.Body), "base64")
	assert.Contains(t, string(r.Body), "response_too_large")

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.EqualValues(t, http.StatusBadGateway, evs[0].GetStatus())
	assert.Positive(t, evs[0].GetPromptTokens(), "what the upstream billed")
	assert.True(t, evs[0].GetPartial())
}
