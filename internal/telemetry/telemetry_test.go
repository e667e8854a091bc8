package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestTracingFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr error
	}{
		{"nothing set: off", nil, false, nil},
		{"endpoint: on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, nil},
		{"traces endpoint: on", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, nil},
		{"exporter otlp without endpoint: on (default endpoint)", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, nil},
		{"exporter none wins over an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false, nil},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false, nil},
		{"zipkin is not built in", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, ErrUnsupportedExporter},
		{"grpc protocol is not built in", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, ErrUnsupportedExporter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := TracingFromEnv(context.Background(), env(tt.env))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.on, tr.Enabled())
			require.NoError(t, tr.Shutdown(context.Background()))
		})
	}
}

func TestAdminOnly(t *testing.T) {
	h := AdminOnly("s3cret-admin", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }),
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusUnauthorized) })
	for _, tt := range []struct {
		auth string
		code int
	}{
		{"", 401}, {"s3cret-admin", 401}, {"Bearer ", 401}, {"Bearer s3cret-admi", 401}, {"Bearer s3cret-admin2", 401},
		{"Basic s3cret-admin", 401}, {"Bearer s3cret-admin", 200},
		{"bearer s3cret-admin", 200}, {"BEARER s3cret-admin", 200}, {"bearer s3cret-admin2", 401},
	} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, tt.code, w.Code, "Authorization %q", tt.auth)
		if tt.code != 200 {
			assert.NotContains(t, w.Body.String(), "metrics")
		}
	}
	// An empty configured token lets nobody in.
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.Header.Set("Authorization", "Bearer ")
	w := httptest.NewRecorder()
	AdminOnly("", http.NotFoundHandler(), func(w http.ResponseWriter) { w.WriteHeader(401) }).ServeHTTP(w, r)
	assert.Equal(t, 401, w.Code)
}

// Off, the decorators are the things they decorate and a span costs no
// allocation.
func TestOffIsFree(t *testing.T) {
	var off *Tracing
	assert.Nil(t, NewTracing(nil))
	assert.Nil(t, NewTracing(noop.NewTracerProvider()))
	h := http.Handler(http.NewServeMux())
	assert.Same(t, h, off.Middleware(h))
	assert.Equal(t, http.DefaultTransport, off.Transport(http.DefaultTransport))
	var cc grpc.ClientConnInterface = &grpc.ClientConn{}
	assert.Equal(t, cc, off.ClientConn(cc))
	assert.Empty(t, off.ServerOptions())
	tr := off.Tracer("x")
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := tr.Start(ctx, "switchboard.attempt", trace.SpanKindInternal)
		if span.IsRecording() {
			t.Fatal("recording while off")
		}
		span.End()
		_ = c
	})
	assert.Zero(t, allocs)
}

// The gRPC decorator puts the caller's span in the outgoing metadata
// (servers continuing it are tested end to end in node).
func TestGRPCPropagation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := NewTracing(tp)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	var seen metadata.MD
	cc := tr.ClientConn(invoker(func(ctx context.Context) { seen, _ = metadata.FromOutgoingContext(ctx) }))
	require.NoError(t, cc.Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer k"), "/svc/M", nil, nil))
	parent.End()
	require.Len(t, seen.Get("traceparent"), 1)
	assert.Contains(t, seen.Get("traceparent")[0], parent.SpanContext().TraceID().String())
	assert.Equal(t, []string{"Bearer k"}, seen.Get("authorization"), "other metadata kept")
}

type invoker func(ctx context.Context)

func (f invoker) Invoke(ctx context.Context, _ string, _, _ any, _ ...grpc.CallOption) error {
	f(ctx)
	return nil
}

func (f invoker) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("no streams")
}

// BenchmarkSpanOff is the cost of an attempt span with tracing off.
func BenchmarkSpanOff(b *testing.B) {
	var tr *Tracer
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tr.Start(ctx, "switchboard.attempt", trace.SpanKindInternal)
		span.End()
	}
}

// BenchmarkSpanOn is the same span recorded by an SDK provider (no export).
func BenchmarkSpanOn(b *testing.B) {
	tr := NewTracing(sdktrace.NewTracerProvider()).Tracer("bench")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tr.Start(ctx, "switchboard.attempt", trace.SpanKindInternal)
		span.End()
	}
}

// A role built without a registry, even a typed nil one, still starts.
func TestRegistererNil(t *testing.T) {
	var typed *prometheus.Registry
	for _, reg := range []prometheus.Registerer{nil, typed} {
		assert.NotPanics(t, func() {
			Registerer(reg).MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"}))
		})
	}
}
