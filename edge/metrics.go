package edge

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
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

	// The children of the vectors, cached: WithLabelValues hashes its
	// labels and allocates on every call. Both maps are bounded as the
	// labels are (route patterns, standard methods, status codes).
	mu     sync.RWMutex
	routes map[string]*routeMetrics
	counts map[requestLabels]prometheus.Counter
}

// routeMetrics are the histograms of one route.
type routeMetrics struct {
	duration, overhead, upstream, firstByte prometheus.Observer
}

type requestLabels struct {
	route, method string
	status        int
}

// route is the histograms of a route, made once.
func (m *httpMetrics) route(route string) *routeMetrics {
	m.mu.RLock()
	rm := m.routes[route]
	m.mu.RUnlock()
	if rm != nil {
		return rm
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rm = m.routes[route]; rm == nil {
		rm = &routeMetrics{
			duration:  m.duration.WithLabelValues(route),
			overhead:  m.overhead.WithLabelValues(route),
			upstream:  m.upstream.WithLabelValues(route),
			firstByte: m.firstByte.WithLabelValues(route),
		}
		m.routes[route] = rm
	}
	return rm
}

// requestCounter is the requests counter of a route, method and status,
// made once.
func (m *httpMetrics) requestCounter(l requestLabels) prometheus.Counter {
	m.mu.RLock()
	c := m.counts[l]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c = m.counts[l]; c == nil {
		c = m.requests.WithLabelValues(l.route, l.method, strconv.Itoa(l.status))
		m.counts[l] = c
	}
	return c
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
	m.routes = make(map[string]*routeMetrics)
	m.counts = make(map[requestLabels]prometheus.Counter)
	reg = telemetry.Registerer(reg)
	reg.MustRegister(m.requests, m.duration, m.overhead, m.upstream, m.firstByte)
	return m
}

// wrap measures next, which must be the ServeMux, so the pattern it matched
// is on the request afterwards. It runs inside overhead, whose upstream
// counter it reads.
func (m *httpMetrics) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var mw *metricsWriter
		st := stateOf(r.Context())
		if st != nil {
			mw = &st.mw
		} else {
			mw = new(metricsWriter)
		}
		*mw = metricsWriter{ResponseWriter: w, start: time.Now(), status: http.StatusOK}
		r = telemetry.TrackRoute(r)
		next.ServeHTTP(mw, r)
		route := telemetry.Route(r)
		m.requestCounter(requestLabels{route, method(r.Method), mw.status}).Inc()
		rm := m.route(route)
		rm.duration.Observe(time.Since(mw.start).Seconds())
		var up int64
		if st != nil {
			up = st.upstream.Load()
		}
		if up > 0 {
			rm.upstream.Observe(float64(up) / 1e6)
		}
		if !mw.first.IsZero() {
			over := mw.first.Sub(mw.start).Microseconds() - up
			rm.overhead.Observe(float64(max(over, 0)) / 1e6)
			if mw.stream {
				rm.firstByte.Observe(mw.first.Sub(mw.start).Seconds())
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
func mountMetrics(mux mounter, g prometheus.Gatherer, adminToken string) {
	if g == nil || adminToken == "" {
		return
	}
	mux.Handle("GET /metrics", telemetry.AdminOnly(adminToken, telemetry.Handler(g), func(w http.ResponseWriter) {
		openai.NewProblem(http.StatusUnauthorized, "invalid_admin_token", "GET /metrics needs the admin token (Authorization: Bearer <admin token>)", "").Write(w)
	}))
}
