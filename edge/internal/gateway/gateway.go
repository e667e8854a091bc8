// Package gateway is the edge's grpc-gateway: the JSON routes of
// proto/gateway.yaml translated to core's gRPC services, with OpenAI-shaped
// errors and the HTTP statuses core asks for.
package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// mdHTTPCode is response metadata by which core asks for a status other than 200.
const mdHTTPCode = "x-http-code"

// forwarded are the request headers passed to core as gRPC metadata (besides
// Authorization, which grpc-gateway always passes).
var forwarded = map[string]bool{
	"x-api-key":                   true,
	"x-goog-api-key":              true,
	"x-switchboard-machine":       true,
	"x-switchboard-catalog-fetch": true,
	"idempotency-key":             true,
}

// New returns a mux serving core's HTTP routes through conn.
func New(ctx context.Context, conn grpc.ClientConnInterface, upstream func(context.Context, int64)) (*runtime.ServeMux, error) {
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newMarshaler()),
		runtime.WithIncomingHeaderMatcher(func(key string) (string, bool) {
			if k := strings.ToLower(key); forwarded[k] {
				return k, true
			}
			return runtime.DefaultHeaderMatcher(key)
		}),
		// Core's response metadata is for the edge, not for clients.
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseOption(func(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
			md, ok := runtime.ServerMetadataFromContext(ctx)
			if !ok {
				return nil
			}
			if us, ok := openai.UpstreamMicros(md.HeaderMD); ok && upstream != nil {
				upstream(ctx, us)
			}

			if v := md.HeaderMD.Get(mdHTTPCode); len(v) > 0 {
				if code, err := strconv.Atoi(v[0]); err == nil {
					w.WriteHeader(code)
				}
			}
			return nil
		}),
		runtime.WithErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			// A body the edge refused to read (too large, too slow, no
			// memory) shows here as a decoding error: answer what it was.
			if openai.BodyError(r) != nil {
				openai.BodyProblem(r, nil).Write(w)
				return
			}
			openai.FromError(err).Write(w)
		}),
		runtime.WithRoutingErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
			switch code {
			case http.StatusMethodNotAllowed:
				openai.NewProblem(code, "method_not_allowed", "method "+r.Method+" is not allowed on "+r.URL.Path, "").Write(w)
			default:
				openai.NewProblem(http.StatusNotFound, "unknown_route", "no route "+r.Method+" "+r.URL.Path, "").Write(w)
			}
		}),
	)
	if err := corev1.RegisterRouterHandlerClient(ctx, mux, corev1.NewRouterClient(conn)); err != nil {
		return nil, err
	}
	if err := corev1.RegisterAdminHandlerClient(ctx, mux, corev1.NewAdminClient(conn)); err != nil {
		return nil, err
	}
	return mux, nil
}
