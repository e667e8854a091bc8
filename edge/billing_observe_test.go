package edge

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

// webhookEvents reads switchboard_webhook_events_total for an outcome.
func webhookEvents(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "switchboard_webhook_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// The webhook consumer's processed, retried and dead-lettered events are
// counted, and each application is a span naming the event, not its body.
func TestBillingWebhookObserved(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	e := newBillingEdge(t, billingtest.Options{MaxDeliver: 2, Metrics: reg, TracerProvider: tp})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")
	sessID, subID, _ := e.checkedOut(alice)
	require.Zero(t, webhookEvents(t, reg, "processed"))

	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sessID)))
	e.eventually(func() bool { return webhookEvents(t, reg, "processed") == 1 }, "processed counted")

	for range 2 {
		fake.FailNext(billingtest.OpGetSubscription, billingtest.Unavailable())
	}
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", subID)))
	e.eventually(func() bool { return webhookEvents(t, reg, "dead_lettered") == 1 }, "dead-lettered counted")
	assert.Equal(t, 1.0, webhookEvents(t, reg, "retried"))
	assert.Equal(t, 1.0, webhookEvents(t, reg, "processed"))

	types := map[string]int{}
	for _, s := range exp.GetSpans() {
		if s.Name != "billing.webhook.apply" {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == "stripe.event_type" {
				types[a.Value.AsString()]++
			}
		}
	}
	assert.Equal(t, map[string]int{"checkout.session.completed": 1, "customer.subscription.updated": 2}, types,
		"one span per application, retries included")
}
