package node_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// An upstream that redirects to another host does not get the connection's
// key sent there (net/http would strip only Authorization, not Anthropic's
// x-api-key): the redirect is not followed, and the next connection answers.
func TestUpstreamRedirectElsewhereIsNotFollowed(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	fallback := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant-fallback"))
	for i, base := range []string{redirecting.URL + "/v1", fallback.URL()} {
		sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-x", "name": []string{"moved", "fallback"}[i],
			"apiKey": []string{"sk-ant-SECRET-KEY-123", "sk-ant-fallback"}[i], "priority": i + 1,
			"providerSpecificData": map[string]any{"baseUrl": base, "prefix": "ac", "enabledModels": []string{"claude-x"}}})
	}
	key := gatewayKey(t, sb)

	r, raw, _ := postMessages(t, sb, key, messagesBody("ac/claude-x", "where are you", false))
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	assert.Contains(t, string(raw), "echo: where are you", "the fallback answered")
	assert.Zero(t, elsewhere.Load(), "the other host was never called")
	assert.NotContains(t, string(raw), "SECRET")
}
