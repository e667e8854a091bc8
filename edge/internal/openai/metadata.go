package openai

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/requestid"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Outgoing returns ctx with the request's credentials and identity as gRPC
// metadata: the API key headers, a request id (the client's X-Request-Id,
// bounded and sanitised, or a new one; a correlation field only), and the machine id of a legacy /{machineId}/v1/... path.
func Outgoing(r *http.Request) (context.Context, string) {
	// The values first (at most one per forwarded header, plus the id and
	// the machine), then one map whose value slices share one array.
	var found [maxOutgoing]string
	var keys [maxOutgoing]string
	n := 0
	for _, h := range forwarded {
		if v := headerValue(r.Header, h.canonical); v != "" {
			keys[n], found[n] = h.md, v
			n++
		}
	}
	id := requestid.From(headerValue(r.Header, "X-Request-Id"))
	keys[n], found[n] = contract.MDRequestID, id
	n++
	if m := r.PathValue("machineId"); m != "" {
		keys[n], found[n] = contract.MDPathMachine, m
		n++
	}
	vals := make([]string, n)
	copy(vals, found[:n])
	md := make(metadata.MD, n)
	for i := range n {
		md[keys[i]] = vals[i : i+1 : i+1]
	}
	return metadata.NewOutgoingContext(r.Context(), md), id
}

// forwardedHeader is a contract.ForwardedHeaders name as the metadata key
// and as the canonical HTTP header key: r.Header.Get of a lower-case name
// would canonicalise (allocate) it on every request.
type forwardedHeader struct{ md, canonical string }

var forwarded = func() []forwardedHeader {
	if len(contract.ForwardedHeaders)+2 > maxOutgoing {
		panic("openai: raise maxOutgoing to hold every forwarded header")
	}
	out := make([]forwardedHeader, len(contract.ForwardedHeaders))
	for i, h := range contract.ForwardedHeaders {
		out[i] = forwardedHeader{md: strings.ToLower(h), canonical: http.CanonicalHeaderKey(h)}
	}
	return out
}()

// maxOutgoing bounds the metadata Outgoing builds: the forwarded headers,
// the request id and the machine (checked when forwarded is built).
const maxOutgoing = 16

// headerValue is h.Get(key) for a key already canonical.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// MetadataSafe reports whether v can reach core as sent: printable ASCII
// (0x20 to 0x7E), gRPC's rule for a metadata value, which grpc-go's client
// refuses to send otherwise (an internal error) and grpc-gateway drops
// silently. A proto string must be valid UTF-8 too, which this implies.
func MetadataSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// passedOn are the request headers the edge hands to core on the gateway
// routes: as metadata (contract.ForwardedHeaders) or in the request
// (anthropicHeaders, sessionHeaders), canonical.
var passedOn = func() []string {
	out := make([]string, 0, len(forwarded)+len(anthropicHeaders)+len(sessionHeaders))
	for _, h := range forwarded {
		out = append(out, h.canonical)
	}
	for _, names := range [][]canonicalName{anthropicHeaders, sessionHeaders} {
		for _, n := range names {
			if !slices.Contains(out, n.canonical) {
				out = append(out, n.canonical)
			}
		}
	}
	return out
}()

// UnsafeHeader returns the canonical name of the first header the edge
// hands to core (every value of it) that MetadataSafe refuses, or "".
// Checked before any call, so a client's malformed header is its own 4xx,
// never a 500 from grpc-go or a header core silently never sees.
func UnsafeHeader(h http.Header) string {
	for _, name := range passedOn {
		for _, v := range h[name] {
			if !MetadataSafe(v) {
				return name
			}
		}
	}
	return ""
}

// InvalidAPIKey is the 401 of a key no machine can have, whichever check of
// the edge finds it.
func InvalidAPIKey() Problem {
	return NewProblem(http.StatusUnauthorized, "invalid_api_key", "invalid API key", "")
}

// UnsafeHeaderProblem is the answer to a request whose header name
// UnsafeHeader refused. A credential is a 401: on the admin routes (admin)
// Authorization carries the admin token (invalid_admin_token), on the
// gateway routes Authorization, X-Api-Key and X-Goog-Api-Key carry an API
// key (invalid_api_key). Any other header is a 400 invalid_header naming it
// in param, optional ones too: a value the client meant and core cannot
// read is not dropped silently.
func UnsafeHeaderProblem(name string, admin bool) Problem {
	switch {
	case admin && name == "Authorization":
		return NewProblem(http.StatusUnauthorized, "invalid_admin_token", "a valid admin token is required (Authorization: Bearer <admin token>)", "")
	case !admin && (name == "Authorization" || name == "X-Api-Key" || name == "X-Goog-Api-Key"):
		return InvalidAPIKey()
	}
	return NewProblem(http.StatusBadRequest, "invalid_header", "the "+name+" header must be printable ASCII", name)
}

// UpstreamMicros reads contract.MDUpstreamUs (core's microseconds spent
// waiting on upstreams, left out of the edge's overhead figure) from a
// call's header metadata.
func UpstreamMicros(md metadata.MD) (int64, bool) {
	v := md.Get(contract.MDUpstreamUs)
	if len(v) == 0 {
		return 0, false
	}
	us, err := strconv.ParseInt(v[0], 10, 64)
	return us, err == nil
}
