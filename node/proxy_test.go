package node_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Every call made for a connection with a proxyUrl goes through that proxy:
// embeddings and chat (core), the token refresh (workers), the live catalog
// fetch (workers) and the provider test (core).
func TestConnectionProxyCarriesEveryCall(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthOldAccess, oauthNewAccess), upstreamtest.WithModels("px-model"))
	direct := upstreamtest.New(t)
	tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
	proxy := newRecordingProxy(t)
	sb := nodetest.Serve(t, t.TempDir())

	id := sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-px", "name": "proxied",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "proxyUrl": proxy.URL, "prefix": "px"},
		"oauth": map[string]any{
			"accessToken": oauthOldAccess, "refreshToken": oauthRefresh1,
			"tokenUrl": tokens.URL(), "clientId": oauthClientID,
		},
	})
	// A connection without a proxy is reached directly.
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-direct", "name": "direct", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": direct.URL(), "prefix": "direct", "enabledModels": []string{"d"}}})

	// Embeddings, through the proxy.
	resp := sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "px/text-embedding-3-small", "input": "hi"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.True(t, proxy.saw("POST "+up.URL()+"/embeddings"), "proxy saw %v", proxy.requests())

	// Chat, through the proxy.
	resp = sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "px/px-model",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.True(t, proxy.saw("POST "+up.URL()+"/chat/completions"), "proxy saw %v", proxy.requests())

	// The upstream refuses the token: the worker's refresh grant goes
	// through the proxy too, then the retry.
	up.Enqueue(upstreamtest.PathEmbeddings, upstreamtest.Unauthorized())
	resp = sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "px/text-embedding-3-small", "input": "hi"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Len(t, tokens.grants(), 1)
	assert.True(t, proxy.saw("POST "+tokens.URL()), "the token refresh went through the proxy: %v", proxy.requests())

	// The live catalog, fetched by a worker, through the proxy.
	require.Eventually(t, func() bool {
		return slices.Contains(sb.ModelIDs(t), "px/px-model")
	}, 10*time.Second, 20*time.Millisecond)
	assert.True(t, proxy.saw("GET "+up.URL()+"/models"), "proxy saw %v", proxy.requests())

	// The provider test, through the proxy.
	before := len(proxy.requests())
	test := sb.Admin(t, http.MethodPost, "/api/providers/"+id+"/test", nil)
	require.Equal(t, http.StatusOK, test.Status, "%s", test.Body)
	assert.Equal(t, true, test.JSON["valid"], "%s", test.Body)
	assert.Equal(t, []string{"GET " + up.URL() + "/models"}, proxy.requests()[before:])

	// Validation with a proxyUrl, through the proxy.
	before = len(proxy.requests())
	val := sb.Admin(t, http.MethodPost, "/api/providers/validate", map[string]any{
		"provider": "openai-compatible-px", "apiKey": oauthNewAccess,
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "proxyUrl": proxy.URL}})
	require.Equal(t, http.StatusOK, val.Status, "%s", val.Body)
	assert.Equal(t, true, val.JSON["valid"])
	assert.Equal(t, []string{"GET " + up.URL() + "/models"}, proxy.requests()[before:])

	// The direct connection never touched the proxy.
	before = len(proxy.requests())
	resp = sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "direct/d",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Len(t, proxy.requests(), before)
	for _, r := range proxy.requests() {
		assert.NotContains(t, r, direct.URL())
	}

	// The view shows the proxy URL (it has no password to redact).
	c := connection(t, sb, id)
	assert.Equal(t, proxy.URL, c["providerSpecificData"].(map[string]any)["proxyUrl"])
}

// A broken proxy fails the call instead of silently going direct.
func TestConnectionProxyIsNotBypassed(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("k"))
	sb := nodetest.Serve(t, t.TempDir())
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-px", "name": "p", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "proxyUrl": nodetest.ClosedURL(t)}})
	resp := sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "openai-compatible-px/text-embedding-3-small", "input": "hi"})
	assert.GreaterOrEqual(t, resp.Status, 500, "%s", resp.Body)
	test := sb.Admin(t, http.MethodPost, "/api/providers/"+id+"/test", nil)
	require.Equal(t, http.StatusOK, test.Status)
	assert.Equal(t, false, test.JSON["valid"])
	assert.Zero(t, len(up.Requests()), "nothing reached the upstream around the proxy")
}
