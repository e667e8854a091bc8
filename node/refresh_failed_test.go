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

// A refresh of an OAuth connection failed (recorded at its token
// generation, without needing a new login). A request for another model of
// the connection, which is not cooled (cooldowns are per model), is refused
// with 401 and asks for a refresh again: the queue drops that job as a copy
// of the one that failed, so the request falls back to the next connection
// at once instead of waiting RefreshWait (15 s) for a refresh that will not
// run.
func TestOAuthFailedRefreshOtherModelsFallBackAtOnce(t *testing.T) {
	const fallbackKey = "sk-fallback-2f9a61"
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fallbackKey))
	tokens := newFakeTokenEndpoint(t, tokenAnswer{
		status: http.StatusBadRequest,
		body:   `{"error":"invalid_client"}`, // a failure, not a refused refresh token
	})
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())
	sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-oauth", "name": "key", "apiKey": fallbackKey, "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})

	resp := embed(t, sb)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Eventually(t, func() bool {
		c := connection(t, sb, id)
		return c["needsRelogin"] == false
	}, 5*time.Second, 20*time.Millisecond)
	require.Len(t, tokens.grants(), 1)

	start := time.Now()
	resp = sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "openai-compatible-oauth/text-embedding-3-large", "input": "hi"})
	took := time.Since(start)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	// Not a measure of speed: waiting for the dropped job lasts RefreshWait
	// (core's dispatch.RefreshWait, 15 s).
	assert.Less(t, took, 5*time.Second, "the request waited for a refresh that was never going to run")
	assert.Len(t, tokens.grants(), 1, "the failed refresh is not repeated within the de-duplication window")
}
