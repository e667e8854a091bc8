package userauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Tokens naming unknown key ids cannot make every request wait on the JWKS
// URL: a failed or fruitless refresh is not retried for a while.
func TestJWKSRefreshIsRateLimited(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	j := NewJWKS(srv.URL, srv.Client())
	for range 5 {
		_, err := j.Key(context.Background(), "made-up", "RS256")
		assert.Error(t, err)
	}
	assert.EqualValues(t, 1, fetches.Load())
}
