package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// latin1Key is a key header's value as a page's fetch() sends "éééééééééé"
// (header values are byte strings: Latin-1, not UTF-8). No gRPC metadata
// can carry it.
const latin1Key = "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9"

// TestKeyCoreCannotReadIsRefusedOnListings: the listings grpc-gateway
// serves (models, model info, voices) answer a key header holding no
// well-formed key (here not ASCII, which grpc-gateway would drop before
// core, running the request keyless as the default machine) with 401
// invalid_api_key: a foreign page is not granted "*" and reads nothing,
// curl gets the same 401, and an allowed origin's page can read the 401.
func TestKeyCoreCannotReadIsRefusedOnListings(t *testing.T) {
	g := newTrustGateway(t, nil)
	const evil = "https://evil.example"
	paths := []string{"/v1/models", "/v1/models/info?id=" + embedModel, "/v1/audio/voices?provider=openai"}
	for _, path := range paths {
		require.Equal(t, http.StatusOK, g.sb.Do(t, http.MethodGet, path, nil, "Authorization", "Bearer "+g.key).Status, path)
	}
	for _, path := range paths {
		for _, h := range []struct{ name, value string }{
			{"X-Api-Key", latin1Key},
			{"Authorization", "Bearer " + latin1Key},
			{"X-Goog-Api-Key", latin1Key},
			{"X-Api-Key", "short"}, // ASCII, not well-formed
		} {
			t.Run(path+"/"+h.name+"/"+h.value[:1], func(t *testing.T) {
				r := g.sb.Do(t, http.MethodGet, path, nil, "Origin", evil, "Sec-Fetch-Site", "cross-site", h.name, h.value)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "a foreign page: %s", r.Body)
				assert.Equal(t, "invalid_api_key", errorCode(r))
				assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"), "nothing a foreign page may read")

				r = g.sb.Do(t, http.MethodGet, path, nil, h.name, h.value)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "curl: %s", r.Body)
				assert.Equal(t, "invalid_api_key", errorCode(r))

				r = g.sb.Do(t, http.MethodGet, path, nil, "Origin", allowedOrigin, h.name, h.value)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "an allowed page: %s", r.Body)
				assert.Equal(t, "invalid_api_key", errorCode(r))
				assert.Equal(t, allowedOrigin, r.Header.Get("Access-Control-Allow-Origin"), "an allowed page reads why")
			})
		}
	}
}
