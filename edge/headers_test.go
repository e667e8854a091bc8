package edge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

// A header the edge would pass on that cannot travel as sent is the
// client's error in the route's own shape (OpenAI's, Anthropic's on
// /v1/messages, GraphQL's), before the route runs; a key header holding no
// well-formed key is refused on every gateway route, and a foreign page
// sending one is granted nothing.
func TestHeadersTheEdgeCannotPassOnAreRefused(t *testing.T) {
	const goodKey = "sk-0123456789abcdef-abc123-0123456789"
	var served bool
	h := cors([]string{"https://app.example"}, nil, checkHeaders(checkKey(false,
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served = true }))))
	for _, c := range []struct {
		name, method, path string
		headers            []string
		status             int
		// body holds the answer's code (or Anthropic's type); acao is its
		// Access-Control-Allow-Origin.
		body, acao string
	}{
		{"non-ASCII key, foreign page", "GET", "/v1/models", []string{"Origin", "https://evil.example", "X-Api-Key", "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9"},
			401, `"code":"invalid_api_key"`, ""},
		{"short key, foreign page", "GET", "/v1/models", []string{"Origin", "https://evil.example", "Authorization", "Bearer short"},
			401, `"code":"invalid_api_key"`, ""},
		{"well-formed key, foreign page", "GET", "/v1/models", []string{"Origin", "https://evil.example", "Authorization", "Bearer " + goodKey},
			200, "", "*"},
		{"non-ASCII key, allowed page", "GET", "/v1/models", []string{"Origin", "https://app.example", "X-Api-Key", "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9"},
			401, `"code":"invalid_api_key"`, "https://app.example"},
		{"non-ASCII key, curl", "POST", "/v1/embeddings", []string{"Authorization", "Bearer \xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9"},
			401, `"code":"invalid_api_key"`, "*"},
		{"second key header not ASCII", "POST", "/v1/embeddings", []string{"Authorization", "Bearer " + goodKey, "X-Goog-Api-Key", "\xe9"},
			401, `"code":"invalid_api_key"`, "*"},
		{"idempotency key", "POST", "/v1/chat/completions", []string{"Idempotency-Key", "\xc3\xa9t\xc3\xa9"},
			400, `"param":"Idempotency-Key","code":"invalid_header"`, "*"},
		{"Anthropic's shape", "POST", "/v1/messages", []string{"X-Api-Key", "sk-\xe9\xe9\xe9\xe9\xe9\xe9"},
			401, `"type":"authentication_error"`, "*"},
		{"Anthropic's beta flags", "POST", "/v1/messages", []string{"Anthropic-Beta", "b\xe9ta"},
			400, `"type":"invalid_request_error"`, "*"},
		{"legacy machine id", "POST", "/%C3%A9/v1/embeddings", []string{"Authorization", "Bearer " + goodKey},
			400, `"param":"machineId","code":"invalid_machine_id"`, "*"},
		{"legacy machine id with a slash", "POST", "/%C3%A9%2Fx/v1/embeddings", []string{"Authorization", "Bearer " + goodKey},
			400, `"code":"invalid_machine_id"`, ""},
		{"admin token", "GET", "/api/settings", []string{"Authorization", "Bearer \xe9"},
			401, `"code":"invalid_admin_token"`, ""},
		{"admin machine", "PATCH", "/api/settings", []string{"X-Switchboard-Machine", "m\xe9"},
			400, `"param":"X-Switchboard-Machine","code":"invalid_header"`, ""},
		{"GraphQL idempotency key", "POST", "/graphql", []string{"Idempotency-Key", "\xe9"},
			400, `"code":"BAD_REQUEST"`, ""},
		{"GraphQL idempotency key in ASCII", "POST", "/graphql", []string{"Idempotency-Key", "k-1"},
			200, "", ""},
		{"a route that passes nothing on", "GET", "/healthz", []string{"X-Api-Key", "\xe9"},
			200, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			served = false
			req := httptest.NewRequest(c.method, c.path, nil)
			for i := 0; i+1 < len(c.headers); i += 2 {
				req.Header.Set(c.headers[i], c.headers[i+1])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, c.status, rec.Code, rec.Body.String())
			assert.Equal(t, c.status == 200, served, "served only when nothing is refused")
			assert.Contains(t, rec.Body.String(), c.body)
			assert.Equal(t, c.acao, rec.Header().Get("Access-Control-Allow-Origin"))
		})
	}
}

// A GraphQL mutation whose Idempotency-Key header is not ASCII is a
// BAD_REQUEST, not the internal error billing's call would fail with (a
// proto string must be UTF-8).
func TestGraphQLIdempotencyKeyNotASCIIIsABadRequest(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	mux := http.NewServeMux()
	require.NoError(t, mountBilling(mux, h.Conn, BillingConfig{JWTSecret: testJWTSecret, Dev: true}, nil))
	srv := httptest.NewServer(checkHeaders(mux))
	t.Cleanup(srv.Close)
	e := &billingEdge{t: t, h: h, srv: srv}
	alice := e.token("alice", "a@example.com")
	r := e.gql(alice, `mutation { checkout(recurring: Monthly) }`, nil, "Idempotency-Key", "\xe9t\xe9")
	require.NotEmpty(t, r.Errors)
	assert.Equal(t, "BAD_REQUEST", r.code())
	var url string
	e.field(e.gql(alice, `mutation { checkout(recurring: Monthly) }`, nil, "Idempotency-Key", "checkout-1"), "checkout", &url)
	assert.NotEmpty(t, url)
}

// A body with a content coding is refused with 415 in the route's own shape
// before any route reads it; identity, in any spelling or list, and a
// request without a body pass.
func TestCompressedBodiesAreRefusedInTheRoutesShape(t *testing.T) {
	var served bool
	h := checkEncoding(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served = true }))
	for _, c := range []struct {
		name, path, body string
		encodings        []string
		status           int
		answer           string
	}{
		{"gzip", "/v1/chat/completions", "x", []string{"gzip"}, 415, `"param":"Content-Encoding","code":"unsupported_content_encoding"`},
		{"zstd after identity", "/v1/embeddings", "x", []string{"identity, zstd"}, 415, `"code":"unsupported_content_encoding"`},
		{"second header", "/api/keys", "x", []string{"identity", "br"}, 415, `"code":"unsupported_content_encoding"`},
		{"Anthropic's shape", "/v1/messages", "x", []string{"gzip"}, 415, `{"type":"error","error":{"type":"invalid_request_error","message":"compressed request bodies`},
		{"GraphQL", "/graphql", "x", []string{"deflate"}, 415, `"code":"UNSUPPORTED_MEDIA_TYPE"`},
		{"webhook", webhookPath, "x", []string{"gzip"}, 415, `{"error":"compressed request bodies`},
		{"identity", "/v1/chat/completions", "x", []string{"Identity"}, 200, ""},
		{"identity list", "/v1/chat/completions", "x", []string{" identity , identity"}, 200, ""},
		{"no coding", "/v1/chat/completions", "x", nil, 200, ""},
		{"no body", "/v1/models", "", []string{"gzip"}, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			served = false
			req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
			if c.body == "" {
				req.Body = http.NoBody
			}
			for _, e := range c.encodings {
				req.Header.Add("Content-Encoding", e)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, c.status, rec.Code, rec.Body.String())
			assert.Equal(t, c.status == 200, served)
			assert.Contains(t, rec.Body.String(), c.answer)
			if c.status == 415 {
				assert.Equal(t, "identity", rec.Header().Get("Accept-Encoding"))
				assert.Contains(t, rec.Body.String(), "Content-Encoding")
			}
		})
	}
}
