package openai

import (
	"context"
	"net/http"
	"strconv"

	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/requestid"
)

// forwarded are the request headers a gateway call hands to core.
var forwarded = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "X-Switchboard-Token-Saver", "X-9router-Token-Saver"}

// Outgoing returns ctx with the request's credentials and identity as gRPC
// metadata: the API key headers, a request id (the client's X-Request-Id,
// bounded and sanitised, or a new one; a correlation field only), and the machine id of a legacy /{machineId}/v1/... path.
func Outgoing(r *http.Request) (context.Context, string) {
	md := make(metadata.MD, 4)
	for _, h := range forwarded {
		if v := r.Header.Get(h); v != "" {
			md.Set(h, v)
		}
	}
	id := requestid.From(r.Header.Get("X-Request-Id"))
	md.Set("x-request-id", id)
	if m := r.PathValue("machineId"); m != "" {
		md.Set("x-switchboard-path-machine", m)
	}
	return metadata.NewOutgoingContext(r.Context(), md), id
}

// MDUpstreamUs is core's response metadata: microseconds spent waiting on
// upstreams, left out of the edge's overhead figure.
const MDUpstreamUs = "x-switchboard-upstream-us"

// UpstreamMicros reads MDUpstreamUs from a call's header metadata.
func UpstreamMicros(md metadata.MD) (int64, bool) {
	v := md.Get(MDUpstreamUs)
	if len(v) == 0 {
		return 0, false
	}
	us, err := strconv.ParseInt(v[0], 10, 64)
	return us, err == nil
}
