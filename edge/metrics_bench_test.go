package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// benchHandler is the edge's middleware stack around a mux with one route
// that reads its body, as New builds it.
func benchHandler(reg *prometheus.Registry, tr *telemetry.Tracing) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	bodies := &openai.BodyGuard{Memory: semaphore.NewWeighted(1 << 20), MemoryWait: time.Second, MinRate: DefaultMinBodyRate, Grace: DefaultBodyGrace}
	return middleware(Config{}, bodies, tr, newHTTPMetrics(reg), limitBody(DefaultMaxBodyBytes, mux))
}

func benchServe(b *testing.B, h http.Handler) {
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer sk-bench-key")
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
