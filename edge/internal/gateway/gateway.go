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
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// mdHTTPCode is response metadata by which core asks for a status other than 200.
const mdHTTPCode = contract.MDHTTPCode

// forwarded are the request headers passed to core as gRPC metadata of the
// same name; internal are metadata keys only roles set, never taken from a
// request (grpc-gateway would pass a "Grpc-Metadata-" header through).
var forwarded, internal = set(contract.ForwardedHeaders), set(contract.InternalKeys)

func set(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// New returns a handler serving core's HTTP routes through conn. beside
// are the patterns ("POST /v1/chat/completions") of the routes served
// beside the gateway, whose other methods reach it: a path of theirs asked
// with another method is answered 405 with the methods they take.
func New(ctx context.Context, conn grpc.ClientConnInterface, upstream func(context.Context, int64), beside []string) (http.Handler, error) {
	allow, err := newAllower(ctx, conn, beside)
	if err != nil {
		return nil, err
	}
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newMarshaler()),
		runtime.WithIncomingHeaderMatcher(func(key string) (string, bool) {
			k := strings.ToLower(key)
			if k == "authorization" {
				return "", false // grpc-gateway passes it itself
			}
			if forwarded[k] {
				return k, true
			}
			k, ok := runtime.DefaultHeaderMatcher(key)
			if ok && internal[strings.ToLower(k)] {
				return "", false
			}
			return k, ok
		}),
		// Core's response metadata is for the edge, not for clients.
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithForwardResponseOption(func(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
			nameRoute(ctx)
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
		runtime.WithErrorHandler(func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			nameRoute(ctx)
			// A body the edge refused to read (too large, too slow, no
			// memory) shows here as a decoding error: answer what it was.
			if openai.BodyError(r) != nil {
				openai.BodyProblem(r, nil).Write(w)
				return
			}
			openai.FromCallError(r, err).Write(w)
		}),
		runtime.WithRoutingErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
			// A path served with other methods (here, or by the edge's
			// handlers beside the gateway) is 405 with Allow (RFC 9110).
			if (code == http.StatusMethodNotAllowed || code == http.StatusNotFound) && allow.methodNotAllowed(w, r) {
				return
			}
			// In the route's shape: Anthropic's under /v1/messages.
			switch code {
			case http.StatusMethodNotAllowed:
				openai.NewProblem(code, "method_not_allowed", "method "+r.Method+" is not allowed on "+r.URL.Path, "").WriteFor(w, r)
			default:
				openai.NewProblem(http.StatusNotFound, "unknown_route", "no route "+r.Method+" "+r.URL.Path, "").WriteFor(w, r)
			}
		}),
	)
	if err := corev1.RegisterRouterHandlerClient(ctx, mux, corev1.NewRouterClient(conn)); err != nil {
		return nil, err
	}
	if err := corev1.RegisterAdminHandlerClient(ctx, mux, corev1.NewAdminClient(conn)); err != nil {
		return nil, err
	}
	return refuseUnsafeHeaders(withModels(mux, corev1.NewRouterClient(conn))), nil
}

// refuseUnsafeHeaders answers a request whose forwarded header core could
// not receive as sent (openai.UnsafeHeader) with a 4xx, where grpc-gateway
// would drop the value and call core without it: a dropped API key would
// run the request keyless, a dropped machine would act on the default one.
// The edge's middleware refuses these first; this keeps the gateway safe
// on its own.
func refuseUnsafeHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := openai.UnsafeHeader(r.Header); name != "" {
			openai.UnsafeHeaderProblem(name, strings.HasPrefix(r.URL.Path, "/api/")).Write(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}
