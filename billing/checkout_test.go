package billing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/billing/internal/payments"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// TestCheckoutRefusedUntilTheSubscriptionEnded: while any subscription of
// the user has not ended (paid or not), checking out again is refused, so
// that the user never holds two live subscriptions; one that needs payment
// points to the billing portal. Once it ended, checkout is allowed.
func TestCheckoutRefusedUntilTheSubscriptionEnded(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	tests := []struct {
		stripeStatus string
		status       billingv1.SubscriptionStatus
		refused      bool
		toPortal     bool
	}{
		{"active", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_ACTIVE, true, false},
		{"trialing", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_TRIALING, true, false},
		{"past_due", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAST_DUE, true, true},
		{"unpaid", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_UNPAID, true, true},
		{"incomplete", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_INCOMPLETE, true, true},
		{"paused", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAUSED, true, true},
		{"canceled", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_CANCELED, false, false},
		{"incomplete_expired", billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_INCOMPLETE_EXPIRED, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.stripeStatus, func(t *testing.T) {
			user := &billingv1.User{Id: "user-" + tt.stripeStatus, Email: tt.stripeStatus + "@example.com"}
			subID := subscribe(t, h, c, user)
			_, err := h.Stripe.SetSubscription(subID, func(s *payments.Subscription) { s.Status = tt.stripeStatus })
			require.NoError(t, err)
			ingest(t, h, c, "customer.subscription.updated", subID)
			awaitSubscription(t, c, user, func(s *billingv1.Subscription) bool { return s.GetStatus() == tt.status }, tt.stripeStatus)

			sessions := stripeCalls(h, billingtest.OpCreateCheckout)
			resp, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: user, Recurring: billingv1.Recurring_RECURRING_YEARLY})
			if !tt.refused {
				require.NoError(t, err)
				require.NotEmpty(t, resp.GetUrl())
				return
			}
			code, r := reason(t, err)
			require.Equal(t, codes.AlreadyExists, code)
			require.Equal(t, "SUBSCRIPTION_ALREADY_EXISTS", r)
			require.Equal(t, sessions, stripeCalls(h, billingtest.OpCreateCheckout), "no checkout session at Stripe")
			if tt.toPortal {
				require.Contains(t, status.Convert(err).Message(), "billing portal")
			} else {
				require.Equal(t, "You already have a subscription", status.Convert(err).Message())
			}
		})
	}
}
