package openai

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Every forwarded header reaches core under its lower-case name, with the
// request id and the legacy path's machine; the client's header names may
// come in any case.
func TestOutgoingForwardsTheContractHeaders(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/m1/v1/chat/completions", nil)
	r.SetPathValue("machineId", "m1")
	r.Header["authorization"] = []string{"Bearer from-a-raw-map"} // not canonical: not what a server parses
	r.Header.Set("Authorization", "Bearer sk-1")
	r.Header.Set("x-goog-api-key", "g-1")
	r.Header.Set("Idempotency-Key", "idem-1")
	r.Header.Set("X-Request-Id", "req-1")
	r.Header.Set("X-Session-Id", "s-1")
	r.Header.Set("session_id", "codex-1")
	ctx, id := Outgoing(r)
	assert.Equal(t, "req-1", id)
	md, _ := metadata.FromOutgoingContext(ctx)
	assert.Equal(t, metadata.MD{
		"authorization":        {"Bearer sk-1"},
		"x-goog-api-key":       {"g-1"},
		"idempotency-key":      {"idem-1"},
		contract.MDRequestID:   {"req-1"},
		contract.MDPathMachine: {"m1"},
	}, md)

	assert.Equal(t, map[string]string{"x-session-id": "s-1", "session_id": "codex-1"}, dialectHeaders(r, sessionHeaders))
	assert.Nil(t, dialectHeaders(httptest.NewRequest(http.MethodPost, "/", nil), sessionHeaders), "none: no map")
}

// Every header the edge hands to core, as metadata or in the request, is
// checked; a value is safe when gRPC metadata can carry it as it is.
func TestUnsafeHeaderCoversWhatReachesCore(t *testing.T) {
	for _, names := range [][]canonicalName{anthropicHeaders, sessionHeaders} {
		for _, n := range names {
			assert.Contains(t, passedOn, n.canonical)
		}
	}
	for _, h := range contract.ForwardedHeaders {
		assert.Contains(t, passedOn, http.CanonicalHeaderKey(h))
	}
	assert.True(t, MetadataSafe("Bearer sk-0123 ~!"))
	for _, v := range []string{"\xe9", "\xc3\xa9", "a\tb", "\x7f"} {
		assert.False(t, MetadataSafe(v), "%q", v)
	}
	h := http.Header{}
	h.Set("X-Api-Key", "sk-fine")
	h.Add("Idempotency-Key", "first")
	h.Add("Idempotency-Key", "second \xe9")
	assert.Equal(t, "Idempotency-Key", UnsafeHeader(h), "every value counts")
	h.Del("Idempotency-Key")
	assert.Empty(t, UnsafeHeader(h))
}
