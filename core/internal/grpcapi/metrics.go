package grpcapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// RequestMetrics count the Router's gateway requests as their usage events
// describe them. The endpoint label is the usage event's endpoint, which
// names the client's dialect for chat (chat.Dialect's String:
// chat.completions, messages, responses) and the API otherwise
// (embeddings, audio.transcriptions, audio.speech): six values. The model label is the resolved upstream model when the
// gateway knows it (Known), else "other"; a request that resolved to no
// provider has provider "none".
type RequestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	// Known reports whether a resolved model may be a label value.
	known func(routing.Target) bool

	// The series a request counts into, by label values: found without
	// formatting labels or hashing them into the vectors again.
	requestSeries  telemetry.SeriesCache[requestLabels, prometheus.Counter]
	durationSeries telemetry.SeriesCache[durationLabels, prometheus.Observer]
	tokenSeries    telemetry.SeriesCache[tokenLabels, prometheus.Counter]
}

type (
	requestLabels struct {
		endpoint, provider, model string
		status                    int32
	}
	durationLabels struct{ endpoint, provider string }
	tokenLabels    struct{ provider, model, kind string }
)

// NewRequestMetrics registers the request metrics with reg; known bounds
// the model label (nil: every model is "other").
func NewRequestMetrics(reg prometheus.Registerer, known func(routing.Target) bool) *RequestMetrics {
	m := &RequestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Name: "requests_total",
			Help: "Gateway requests core answered, by endpoint (the client's API and dialect, one of chat.completions, messages, responses, embeddings, audio.transcriptions, audio.speech), provider, model and the HTTP status the client got.",
		}, []string{"endpoint", "provider", "model", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: telemetry.Namespace, Name: "request_duration_seconds",
			Help:    "Time core spent on a gateway request, a relayed stream included, by endpoint (the client's API and dialect, as in switchboard_requests_total) and provider.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"endpoint", "provider"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Name: "tokens_total",
			Help: "Tokens billed, by provider, model and kind (prompt or completion).",
		}, []string{"provider", "model", "kind"}),
		known: known,
	}
	telemetry.Registerer(reg).MustRegister(m.requests, m.duration, m.tokens)
	return m
}

// observe counts a finished request from its usage event.
func (m *RequestMetrics) observe(res dispatch.Result, ev *busv1.UsageEvent, start time.Time) {
	if m == nil {
		return
	}
	provider, model := ev.GetProvider(), telemetry.Other
	if provider == "" {
		provider = "none"
	}
	if m.known != nil && m.known(res.Target) {
		model = ev.GetModel()
	}
	endpoint, status := ev.GetEndpoint(), ev.GetStatus()
	m.requestSeries.Get(requestLabels{endpoint, provider, model, status}, func() prometheus.Counter {
		return m.requests.WithLabelValues(endpoint, provider, model, strconv.Itoa(int(status)))
	}).Inc()
	m.durationSeries.Get(durationLabels{endpoint, provider}, func() prometheus.Observer {
		return m.duration.WithLabelValues(endpoint, provider)
	}).Observe(time.Since(start).Seconds())
	if n := ev.GetPromptTokens(); n > 0 {
		m.tokenSeries.Get(tokenLabels{provider, model, "prompt"}, func() prometheus.Counter {
			return m.tokens.WithLabelValues(provider, model, "prompt")
		}).Add(float64(n))
	}
	if n := ev.GetCompletionTokens(); n > 0 {
		m.tokenSeries.Get(tokenLabels{provider, model, "completion"}, func() prometheus.Counter {
			return m.tokens.WithLabelValues(provider, model, "completion")
		}).Add(float64(n))
	}
}
