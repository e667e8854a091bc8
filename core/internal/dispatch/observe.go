package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// Metrics count the dispatcher's upstream attempts, fallbacks, exhausted
// requests and token refreshes. Labels are bounded: the provider is a
// registry id, the outcome and reason a credential.Reason.
type Metrics struct {
	attempts  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	fallbacks *prometheus.CounterVec
	exhausted *prometheus.CounterVec
	refreshes *prometheus.CounterVec

	// The series every attempt counts into, by label values (series.go).
	attemptSeries  telemetry.SeriesCache[[2]string, prometheus.Counter]
	durationSeries telemetry.SeriesCache[string, prometheus.Observer]
}

// NewMetrics registers the dispatcher's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Subsystem: "upstream", Name: "attempts_total",
			Help: "Upstream calls, one per connection tried, by provider and outcome (ok, or the failure's classification).",
		}, []string{"provider", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: telemetry.Namespace, Subsystem: "upstream", Name: "attempt_duration_seconds",
			Help:    "Duration of one upstream call, a relayed stream included, by provider.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"provider"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Name: "fallbacks_total",
			Help: "Connections that failed with a fallback-eligible error and were cooled down, by provider and cause; the request went on to the next connection or model, if any.",
		}, []string{"provider", "reason"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Name: "exhausted_total",
			Help: "Requests for which every connection of a provider failed or was cooling down, by provider and outcome code.",
		}, []string{"provider", "code"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Name: "token_refreshes_total",
			Help: "OAuth token refreshes a request waited for after an upstream refused its token, by provider and outcome.",
		}, []string{"provider", "outcome"}),
	}
	telemetry.Registerer(reg).MustRegister(m.attempts, m.duration, m.fallbacks, m.exhausted, m.refreshes)
	return m
}

// Instrument has the dispatcher count into m and trace with tr; nil for
// either leaves it off. It returns d.
func (d *Dispatcher) Instrument(m *Metrics, tr *telemetry.Tracer) *Dispatcher {
	d.metrics, d.tracer = m, tr
	return d
}

// resolve resolves the request's model in a span of its own.
func (d *Dispatcher) resolve(ctx context.Context, req Request) ([]routing.Target, error) {
	_, span := d.tracer.Start(ctx, "switchboard.resolve", trace.SpanKindInternal)
	targets, err := d.resolver.ResolveAll(req.MachineID, req.Model)
	if errors.Is(err, routing.ErrModelNotFound) || errors.Is(err, routing.ErrNoCredentials) {
		// What this replica missed may have been written through another
		// one a moment ago: catch up, then look again.
		if cerr := d.store.CatchUpRouting(ctx); cerr != nil {
			if ctx.Err() == nil {
				d.log.Warn("could not catch up with the routing state", "err", cerr)
			}
		} else {
			targets, err = d.resolver.ResolveAll(req.MachineID, req.Model)
		}
	}
	if span.IsRecording() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		for i, t := range targets {
			if i == 0 {
				span.SetAttributes(attribute.String("switchboard.provider", t.Spec.ID), attribute.Int("switchboard.targets", len(targets)))
			}
		}
		span.End()
	}
	return targets, err
}

// attempt makes one upstream call with one connection, in a span that names
// the provider, the connection id and the upstream model (never a secret),
// and counts it.
func (d *Dispatcher) attempt(ctx context.Context, t routing.Target, c credential.Candidate, call Call) error {
	conn := c.Value.(*Conn)
	ctx, span := d.tracer.Start(ctx, "switchboard.attempt", trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("switchboard.provider", t.Spec.ID),
			attribute.String("switchboard.connection_id", c.ConnectionID),
			attribute.String("switchboard.upstream_model", t.Model))
	}
	if d.metrics == nil && !span.IsRecording() {
		return call(ctx, t, conn)
	}
	start := time.Now()
	err := call(ctx, t, conn)
	outcome := "ok"
	if err != nil {
		f := credential.Classify(err, time.Now())
		outcome = string(f.Reason)
		if errors.Is(err, context.Canceled) {
			outcome = "canceled"
		}
		if span.IsRecording() {
			span.SetAttributes(attribute.String("switchboard.outcome", outcome), attribute.Bool("switchboard.fallback", f.Fallback))
			if f.Status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", f.Status))
			}
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.End()
	if d.metrics != nil {
		m, provider := d.metrics, t.Spec.ID
		m.attemptSeries.Get([2]string{provider, outcome}, func() prometheus.Counter {
			return m.attempts.WithLabelValues(provider, outcome)
		}).Inc()
		m.durationSeries.Get(provider, func() prometheus.Observer {
			return m.duration.WithLabelValues(provider)
		}).Observe(time.Since(start).Seconds())
	}
	return err
}

// served counts a provider's fallbacks and its exhaustion.
func (d *Dispatcher) served(provider string, failed []credential.Failure, err error) {
	if d.metrics == nil || (err == nil && len(failed) == 0) {
		return
	}
	for _, f := range failed {
		d.metrics.fallbacks.WithLabelValues(provider, string(f.Reason)).Inc()
	}
	var ex *credential.ExhaustedError
	if errors.As(err, &ex) {
		d.metrics.exhausted.WithLabelValues(provider, ex.Code).Inc()
	}
}

// Refresh has a worker refresh a connection's token (see refresh), in a
// span, counted.
func (d *Dispatcher) Refresh(ctx context.Context, c credential.Candidate) (credential.Candidate, error) {
	ctx, span := d.tracer.Start(ctx, "switchboard.token_refresh", trace.SpanKindInternal)
	provider := ""
	if conn, ok := c.Value.(*Conn); ok {
		provider = conn.Spec.ID
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("switchboard.provider", provider), attribute.String("switchboard.connection_id", c.ConnectionID))
	}
	next, err := d.refresh(ctx, c)
	outcome := "ok"
	if err != nil {
		outcome = "failed"
		if errors.Is(err, ErrNeedsRelogin) {
			outcome = "needs_relogin"
		}
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
	if d.metrics != nil {
		d.metrics.refreshes.WithLabelValues(provider, outcome).Inc()
	}
	return next, err
}
