package edge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/inproc"
)

// Each route the edge serves itself, asked with a method it does not take,
// answers 405 with the methods it takes in Allow (where the request falls
// through to the gateway), not 404 unknown_route.
func TestEdgeRoutesAskedWithAnotherMethodAnswerAllow(t *testing.T) {
	e, err := New(context.Background(), Config{HTTPAddr: "127.0.0.1:0", CLIHomeDir: t.TempDir()},
		Deps{Core: inproc.New(nil, nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.ln.Close() })
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/chat/completions", "POST"},
		{"GET", "/v1/embeddings", "POST"},
		{"GET", "/v1/responses", "POST"},
		{"POST", "/v1/responses/resp_1", "GET"},
		{"GET", "/v1/messages", "POST"},
		{"GET", "/v1/messages/count_tokens", "POST"},
		{"GET", "/v1/audio/transcriptions", "POST"},
		{"GET", "/v1/audio/speech", "POST"},
		{"POST", "/healthz", "GET"},
		{"POST", "/readyz", "GET"},
		{"POST", "/api/billing/subscriptions", "GET"},
		{"GET", "/api/billing/dead-letters/d1/retry", "POST"},
		{"POST", "/ui/", "GET"},
		{"PUT", "/api/settings", "GET, PATCH"},
	} {
		rec := httptest.NewRecorder()
		e.srv.Handler.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "%s %s: %s", c.method, c.path, rec.Body)
		assert.Equal(t, c.allow, rec.Header().Get("Allow"), "%s %s", c.method, c.path)
	}
}

// The routes mounted only with their dependencies (GraphQL and the Stripe
// webhook with billing, /metrics with a registry and the admin token) are
// 405 with Allow too, GET /graphql among the allowed methods only where the
// GraphiQL page is served; without their dependencies they are no route.
func TestEdgeOptionalRoutesAskedWithAnotherMethodAnswerAllow(t *testing.T) {
	edgeWith := func(t *testing.T, dev bool, deps Deps) *Edge {
		t.Helper()
		deps.Core, deps.Logger = inproc.New(nil, nil), slog.New(slog.NewTextHandler(io.Discard, nil))
		e, err := New(context.Background(), Config{HTTPAddr: "127.0.0.1:0", CLIHomeDir: t.TempDir(), AdminToken: "admin-token",
			Billing: BillingConfig{JWTSecret: testJWTSecret, Dev: dev}}, deps)
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.ln.Close() })
		return e
	}
	check := func(t *testing.T, e *Edge, method, path string, status int, allow string) {
		t.Helper()
		rec := httptest.NewRecorder()
		e.srv.Handler.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		assert.Equal(t, status, rec.Code, "%s %s: %s", method, path, rec.Body)
		assert.Equal(t, allow, rec.Header().Get("Allow"), "%s %s", method, path)
	}
	t.Run("mounted", func(t *testing.T) {
		e := edgeWith(t, false, Deps{Billing: inproc.New(nil, nil), Metrics: prometheus.NewRegistry()})
		check(t, e, "GET", "/graphql", http.StatusMethodNotAllowed, "POST")
		check(t, e, "GET", "/webhooks/stripe", http.StatusMethodNotAllowed, "POST")
		check(t, e, "POST", "/metrics", http.StatusMethodNotAllowed, "GET")
	})
	t.Run("GraphiQL page", func(t *testing.T) {
		e := edgeWith(t, true, Deps{Billing: inproc.New(nil, nil)})
		check(t, e, "PUT", "/graphql", http.StatusMethodNotAllowed, "GET, POST")
	})
	t.Run("not mounted", func(t *testing.T) {
		e := edgeWith(t, false, Deps{})
		check(t, e, "GET", "/graphql", http.StatusNotFound, "")
		check(t, e, "GET", "/webhooks/stripe", http.StatusNotFound, "")
		check(t, e, "POST", "/metrics", http.StatusNotFound, "")
	})
}
