package webhook

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// Traced applies each event in a span of its own (event id and type, never
// the payload); with a nil tracer it returns a.
func Traced(a Applier, tr *telemetry.Tracer) Applier {
	if tr == nil {
		return a
	}
	return tracedApplier{a: a, tr: tr}
}

type tracedApplier struct {
	a  Applier
	tr *telemetry.Tracer
}

var _ Applier = tracedApplier{}

func (t tracedApplier) Apply(ctx context.Context, ev Event) error {
	ctx, span := t.tr.Start(ctx, "billing.webhook.apply", trace.SpanKindConsumer)
	defer span.End()
	span.SetAttributes(attribute.String("stripe.event_id", ev.ID), attribute.String("stripe.event_type", ev.Type))
	err := t.a.Apply(ctx, ev)
	if err != nil {
		span.SetStatus(codes.Error, "apply failed")
	}
	return err
}

var eventsDesc = prometheus.NewDesc(telemetry.Namespace+"_webhook_events_total",
	"Stripe events the billing consumer handled, by outcome (processed, retried, dead_lettered).",
	[]string{"outcome"}, nil)

// Collector exposes the consumer's counters (Stats) at scrape time.
func (c *Consumer) Collector() prometheus.Collector { return consumerCollector{c} }

type consumerCollector struct{ c *Consumer }

func (cc consumerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- eventsDesc }

func (cc consumerCollector) Collect(ch chan<- prometheus.Metric) {
	s := cc.c.Stats()
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(s.Applied), "processed")
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(s.Retried), "retried")
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, float64(s.DeadLettered), "dead_lettered")
}
