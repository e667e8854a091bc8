package edge

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// benchHandler is the edge's middleware stack around a mux with one route,
// as New builds it.
func benchHandler(reg *prometheus.Registry, tr *telemetry.Tracing) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	inner := http.Handler(mux)
	if reg != nil {
		inner = newHTTPMetrics(reg).wrap(mux)
	}
	return overhead(cors(nil, tr.Middleware(inner)))
}

func benchServe(b *testing.B, h http.Handler) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
}

// The edge's per-request cost of metrics and traces, each against the
// bare stack.
func BenchmarkEdgeStackBare(b *testing.B) { benchServe(b, benchHandler(nil, nil)) }
func BenchmarkEdgeStackMetrics(b *testing.B) {
	benchServe(b, benchHandler(prometheus.NewRegistry(), nil))
}
func BenchmarkEdgeStackMetricsAndTraces(b *testing.B) {
	benchServe(b, benchHandler(prometheus.NewRegistry(), telemetry.NewTracing(sdktrace.NewTracerProvider())))
}
