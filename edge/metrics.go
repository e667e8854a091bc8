package edge

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// latencyBuckets span a cached answer to a long generation, in seconds.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// overheadBuckets are for the gateway's own time, in seconds.
var overheadBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}

// httpMetrics are the edge's request metrics. Every label is bounded: the
// route is the pattern that matched, never the path.
type httpMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	overhead  *prometheus.HistogramVec
	upstream  *prometheus.HistogramVec
	firstByte *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests answered by the edge, by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: telemetry.Namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help: "Time from a request's arrival to the end of its answer (a stream's last event).", Buckets: latencyBuckets,
		}, []string{"route"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: telemetry.Namespace, Subsystem: "http", Name: "overhead_seconds",
			Help: "The gateway's own time before an answer started: time to the first byte less the time core waited on upstreams (X-Switchboard-Overhead-Us).", Buckets: overheadBuckets,
		}, []string{"route"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: telemetry.Namespace, Subsystem: "http", Name: "upstream_seconds",
			Help: "Time core spent waiting on upstreams before an answer started, as core reported it.", Buckets: latencyBuckets,
		}, []string{"route"}),
		firstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: telemetry.Namespace, Subsystem: "http", Name: "stream_first_byte_seconds",
			Help: "Time from a streamed request's arrival to its first byte to the client.", Buckets: latencyBuckets,
		}, []string{"route"}),
	}
	reg = telemetry.Registerer(reg)
	reg.MustRegister(m.requests, m.duration, m.overhead, m.upstream, m.firstByte)
	return m
}

// wrap measures next, which must be the ServeMux, so the pattern it matched
// is on the request afterwards. It runs inside overhead, whose upstream
// counter it reads.
func (m *httpMetrics) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mw := &metricsWriter{ResponseWriter: w, start: time.Now(), status: http.StatusOK}
		r = telemetry.TrackRoute(r)
		next.ServeHTTP(mw, r)
		route := telemetry.Route(r)
		m.requests.WithLabelValues(route, method(r.Method), strconv.Itoa(mw.status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(mw.start).Seconds())
		var up int64
		if p, ok := r.Context().Value(upstreamKey{}).(*atomic.Int64); ok {
			up = p.Load()
		}
		if up > 0 {
			m.upstream.WithLabelValues(route).Observe(float64(up) / 1e6)
		}
		if !mw.first.IsZero() {
			over := mw.first.Sub(mw.start).Microseconds() - up
			m.overhead.WithLabelValues(route).Observe(float64(max(over, 0)) / 1e6)
			if mw.stream {
				m.firstByte.WithLabelValues(route).Observe(mw.first.Sub(mw.start).Seconds())
			}
		}
	})
}

// method bounds the method label to the standard methods.
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return telemetry.Other
}

// metricsWriter notes the status, the time of the first byte and whether
// the answer is an event stream.
type metricsWriter struct {
	http.ResponseWriter
	start  time.Time
	first  time.Time
	status int
	wrote  bool
	stream bool
}

func (w *metricsWriter) begin(code int) {
	if w.wrote {
		return
	}
	w.wrote, w.status, w.first = true, code, time.Now()
	w.stream = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
}

func (w *metricsWriter) WriteHeader(code int) {
	w.begin(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *metricsWriter) Write(b []byte) (int, error) {
	w.begin(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *metricsWriter) Flush() {
	w.begin(http.StatusOK)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *metricsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// mountMetrics serves the process's registry at GET /metrics to holders of
// the admin token; without a registry or a token the route is absent (a
// split edge without the admin token uses SWITCHBOARD_METRICS_ADDR).
func mountMetrics(mux *http.ServeMux, g prometheus.Gatherer, adminToken string) {
	if g == nil || adminToken == "" {
		return
	}
	mux.Handle("GET /metrics", telemetry.AdminOnly(adminToken, telemetry.Handler(g), func(w http.ResponseWriter) {
		openai.NewProblem(http.StatusUnauthorized, "invalid_admin_token", "GET /metrics needs the admin token (Authorization: Bearer <admin token>)", "").Write(w)
	}))
}
