package gateway

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// methods are the methods a route may take, in the order Allow lists them.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// ownRoutes are the gateway's routes served beside grpc-gateway's (by
// withModels).
var ownRoutes = []string{"GET " + modelsPrefix + "{id...}"}

// allower finds the methods a path is served with: the gateway's routes,
// matched by a second grpc-gateway mux holding the same routes whose
// handlers only note the match, ownRoutes, and the routes served beside the
// gateway (a request with a method they do not take misses them and
// reaches the gateway).
type allower struct {
	gateway *runtime.ServeMux
	edge    *http.ServeMux
}

// probeKey holds, in a probing request's context, where the probe mux
// notes a match.
type probeKey struct{}

func newAllower(ctx context.Context, conn grpc.ClientConnInterface, beside []string) (*allower, error) {
	noted := func(runtime.HandlerFunc) runtime.HandlerFunc {
		return func(_ http.ResponseWriter, r *http.Request, _ map[string]string) {
			if matched, ok := r.Context().Value(probeKey{}).(*bool); ok {
				*matched = true
			}
		}
	}
	a := &allower{
		gateway: runtime.NewServeMux(
			runtime.WithMiddlewares(noted),
			runtime.WithRoutingErrorHandler(unrouted),
			runtime.WithErrorHandler(failed),
			runtime.WithDisablePathLengthFallback(),
			runtime.WithDisableHTTPMethodOverride(),
		),
		edge: http.NewServeMux(),
	}
	if err := corev1.RegisterRouterHandlerClient(ctx, a.gateway, corev1.NewRouterClient(conn)); err != nil {
		return nil, err
	}
	if err := corev1.RegisterAdminHandlerClient(ctx, a.gateway, corev1.NewAdminClient(conn)); err != nil {
		return nil, err
	}
	none := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, p := range slices.Concat(ownRoutes, beside) {
		a.edge.Handle(p, none)
	}
	return a, nil
}

// allowed is the methods r's path is served with, in Allow's order.
func (a *allower) allowed(r *http.Request) []string {
	var out []string
	for _, m := range methods {
		if a.serves(r, m) {
			out = append(out, m)
		}
	}
	return out
}

// serves reports whether a route serves r's path with method.
func (a *allower) serves(r *http.Request, method string) bool {
	matched := false
	p := (&http.Request{Method: method, URL: r.URL, Host: r.Host, Header: http.Header{}, Body: http.NoBody}).
		WithContext(context.WithValue(r.Context(), probeKey{}, &matched))
	a.gateway.ServeHTTP(discard{}, p)
	if matched {
		return true
	}
	_, pattern := a.edge.Handler(p)
	return pattern != ""
}

// methodNotAllowed answers 405 with Allow when r's path is served with
// other methods, and reports whether it did.
func (a *allower) methodNotAllowed(w http.ResponseWriter, r *http.Request) bool {
	allow := a.allowed(r)
	if len(allow) == 0 || slices.Contains(allow, r.Method) {
		return false
	}
	list := strings.Join(allow, ", ")
	w.Header().Set("Allow", list)
	openai.NewProblem(http.StatusMethodNotAllowed, "method_not_allowed",
		"method "+r.Method+" is not allowed on "+r.URL.Path+" (allowed: "+list+")", "").WriteFor(w, r)
	return true
}

// unrouted and failed are the probe mux's error handlers: a probe writes
// nothing.
func unrouted(context.Context, *runtime.ServeMux, runtime.Marshaler, http.ResponseWriter, *http.Request, int) {
}

func failed(context.Context, *runtime.ServeMux, runtime.Marshaler, http.ResponseWriter, *http.Request, error) {
}

// discard is a response writer for probing requests, which write nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
