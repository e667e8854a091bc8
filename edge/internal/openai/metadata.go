package openai

import (
	"context"
	"net/http"
	"strconv"

	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/requestid"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Outgoing returns ctx with the request's credentials and identity as gRPC
// metadata: the API key headers, a request id (the client's X-Request-Id,
// bounded and sanitised, or a new one; a correlation field only), and the machine id of a legacy /{machineId}/v1/... path.
func Outgoing(r *http.Request) (context.Context, string) {
	md := make(metadata.MD, 4)
	for _, h := range contract.ForwardedHeaders {
		if v := r.Header.Get(h); v != "" {
			md.Set(h, v)
		}
	}
	id := requestid.From(r.Header.Get("X-Request-Id"))
	md.Set(contract.MDRequestID, id)
	if m := r.PathValue("machineId"); m != "" {
		md.Set(contract.MDPathMachine, m)
	}
	return metadata.NewOutgoingContext(r.Context(), md), id
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
