package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/billing/internal/webhook"
)

// TestDeletedEventsConsumerIsCreatedAgain: billing's durable consumer of
// Stripe events deleted under it (an operator's `nats consumer rm`, the
// stream made again) is created again and the events that arrive are
// applied, where the consumption ended silently and no event was applied
// until the process restarted.
func TestDeletedEventsConsumerIsCreatedAgain(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	js, err := jetstream.New(h.NATS)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := js.Consumer(ctx, webhook.Stream, "billing")
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "billing created its consumer")
	require.NoError(t, js.DeleteConsumer(ctx, webhook.Stream, "billing"))

	before := h.Billing.EventStats().Applied
	ingest(t, h, c, "customer.created", "cus_after_delete")
	require.Eventually(t, func() bool { return h.Billing.EventStats().Applied > before }, 15*time.Second, 10*time.Millisecond,
		"an event that arrived after the consumer was deleted is applied")
}
