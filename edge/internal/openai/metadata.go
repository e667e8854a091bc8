package openai

import (
	"context"
	"net/http"
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
