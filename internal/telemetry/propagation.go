package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/rpcauth"
)

// The W3C trace context travels by hand: propagation.TraceContext over HTTP
// headers and gRPC metadata, a few lines each, instead of the otelhttp and
// otelgrpc contrib modules and their dependencies.

// mdCarrier adapts gRPC metadata to a TextMapCarrier.
type mdCarrier metadata.MD

var _ propagation.TextMapCarrier = mdCarrier(nil)

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// inject adds ctx's span context to the outgoing metadata.
func (t *Tracing) inject(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	md, ok := metadata.FromOutgoingContext(ctx) // a new MD: ours to change
	if !ok {
		md = metadata.MD{}
	}
	t.prop.Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}

// ClientConn carries the caller's trace context on every call made through
// cc, in process or over the network. Off, it returns cc itself.
func (t *Tracing) ClientConn(cc grpc.ClientConnInterface) grpc.ClientConnInterface {
	if t == nil || cc == nil {
		return cc
	}
	return rpcauth.WithContext(cc, t.inject)
}

// ServerOptions are the gRPC server options that continue a caller's trace
// in a server span per call. Off, there are none.
func (t *Tracing) ServerOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(t.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(t.StreamServerInterceptor()),
	}
}

// UnaryServerInterceptor starts a server span per unary call, continuing
// the caller's trace; the in-process path runs it as the gRPC server does.
// Off, it is nil.
func (t *Tracing) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	if t == nil {
		return nil
	}
	tr := t.provider.Tracer("switchboard/grpc")
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = t.prop.Extract(ctx, mdCarrier(md))
		ctx, span := tr.Start(ctx, info.FullMethod, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", info.FullMethod)))
		resp, err := h(ctx, req)
		endServerSpan(span, err)
		return resp, err
	}
}

// StreamServerInterceptor starts a server span per stream, continuing the
// caller's trace; the in-process path runs it as the gRPC server does.
// Off, it is nil.
func (t *Tracing) StreamServerInterceptor() grpc.StreamServerInterceptor {
	if t == nil {
		return nil
	}
	tr := t.provider.Tracer("switchboard/grpc")
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		ctx := t.prop.Extract(ss.Context(), mdCarrier(md))
		ctx, span := tr.Start(ctx, info.FullMethod, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", info.FullMethod)))
		err := h(srv, &tracedStream{ServerStream: ss, ctx: ctx})
		endServerSpan(span, err)
		return err
	}
}

// endServerSpan ends a server span with the call's gRPC status.
func endServerSpan(span trace.Span, err error) {
	if err != nil {
		st := status.Convert(err)
		span.SetAttributes(attribute.String("rpc.grpc.status_code", st.Code().String()))
		if st.Code() != grpccodes.OK {
			span.SetStatus(codes.Error, st.Code().String())
		}
	}
	span.End()
}

type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *tracedStream) Context() context.Context { return s.ctx }

// Transport carries the request's trace context to an upstream: each
// request gets a client span and a traceparent header. Off, it returns rt.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	if t == nil {
		return rt
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &tracedTransport{rt: rt, t: t, tr: t.provider.Tracer("switchboard/upstream")}
}

type tracedTransport struct {
	rt http.RoundTripper
	t  *Tracing
	tr trace.Tracer
}

func (tt *tracedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := tt.tr.Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("server.address", r.URL.Host)))
	r = r.Clone(ctx)
	tt.t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := tt.rt.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, "transport error")
		span.End()
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	// The span covers the wait for the response's headers; the body is the
	// caller's to read.
	span.End()
	return resp, nil
}

// Middleware continues an incoming traceparent (or starts a trace) in a
// server span per HTTP request, named by the route pattern that served it.
// Off, it returns next.
func (t *Tracing) Middleware(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	tr := t.provider.Tracer("switchboard/http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tr.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r2 := TrackRoute(r.WithContext(ctx))
		next.ServeHTTP(sw, r2)
		route := Route(r2)
		span.SetName(r.Method + " " + route)
		span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type routeKey struct{}

// RouteSlot is where a handler below the ServeMux (the grpc-gateway)
// names the route it served (SetRoute).
type RouteSlot struct{ pattern string }

// WithRouteSlot returns ctx with s as the place where inner handlers name
// their route: for a middleware that keeps the slot in its own per-request
// allocation and puts it in the context before TrackRoute runs (TrackRoute
// then leaves the request as it is).
func WithRouteSlot(ctx context.Context, s *RouteSlot) context.Context {
	return context.WithValue(ctx, routeKey{}, s)
}

// TrackRoute returns r with a place in its context where inner handlers
// may name their route (SetRoute), reusing one already there.
func TrackRoute(r *http.Request) *http.Request {
	if _, ok := r.Context().Value(routeKey{}).(*RouteSlot); ok {
		return r
	}
	return r.WithContext(WithRouteSlot(r.Context(), &RouteSlot{}))
}

// SetRoute names the path template of the route that serves the request
// of ctx ("/api/providers/{id}"), for handlers that route below the
// ServeMux; Route prefixes the method.
func SetRoute(ctx context.Context, pattern string) {
	if h, ok := ctx.Value(routeKey{}).(*RouteSlot); ok {
		h.pattern = pattern
	}
}

// Route is the pattern of the route that served r (the request passed down
// the handler chain after TrackRoute), never the raw path: the one an inner
// handler set, else the ServeMux's, else "unmatched".
func Route(r *http.Request) string {
	if h, ok := r.Context().Value(routeKey{}).(*RouteSlot); ok && h.pattern != "" {
		return r.Method + " " + h.pattern
	}
	if r.Pattern == "" {
		return "unmatched"
	}
	return r.Pattern
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (tt *tracedTransport) CloseIdleConnections() {
	if c, ok := tt.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
