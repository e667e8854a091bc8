package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// subscribe gives a user a trialing subscription through checkout and its
// webhook.
func subscribeVouched(t *testing.T, h *billingtest.Harness, c billingv1.BillingClient, id string) {
	t.Helper()
	ctx := rpcauth.VouchUser(context.Background(), rpcauth.User{ID: id, Email: id + "@example.com"})
	resp, err := c.Checkout(ctx, &billingv1.CheckoutRequest{Recurring: billingv1.Recurring_RECURRING_MONTHLY})
	require.NoError(t, err)
	sess, ok := h.Stripe.SessionByURL(resp.GetUrl())
	require.True(t, ok)
	_, _, err = h.Stripe.CompleteCheckout(sess.ID, 14)
	require.NoError(t, err)
	payload := h.Stripe.Event("checkout.session.completed", sess.ID)
	_, err = c.IngestWebhook(ctx, &billingv1.IngestWebhookRequest{Payload: payload, Signature: billingtest.Sign(payload)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{})
		return err == nil && got.GetSubscription() != nil
	}, 10*time.Second, 5*time.Millisecond)
}

// Billing acts for the user the caller vouched for in metadata: a body
// naming someone else is refused and changes nothing, a body naming nobody
// acts for the vouched user, and with nobody vouched there is no user.
func TestUserComesFromMetadataNotBody(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := billingv1.NewBillingClient(h.Conn)
	subscribeVouched(t, h, c, "bob")
	bob := rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "bob"})
	mallory := rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "mallory", Email: "m@example.com"})

	_, err := c.CancelSubscription(mallory, &billingv1.CancelSubscriptionRequest{User: &billingv1.User{Id: "bob"}})
	code, why := reason(t, err)
	require.Equal(t, codes.PermissionDenied, code)
	require.Equal(t, "USER_MISMATCH", why)
	_, err = c.ListInvoices(mallory, &billingv1.ListInvoicesRequest{User: &billingv1.User{Id: "bob"}})
	_, why = reason(t, err)
	require.Equal(t, "USER_MISMATCH", why)
	got, err := c.GetSubscription(bob, &billingv1.GetSubscriptionRequest{})
	require.NoError(t, err)
	require.Nil(t, got.GetSubscription().GetCanceledAt(), "bob's subscription is untouched")

	// Without a body user the vouched user is the one acted for: mallory
	// has no subscription to cancel, bob's stays.
	_, err = c.CancelSubscription(mallory, &billingv1.CancelSubscriptionRequest{})
	_, why = reason(t, err)
	require.Equal(t, "SUBSCRIPTION_NOT_EXISTS", why)
	mine, err := c.GetSubscription(mallory, &billingv1.GetSubscriptionRequest{User: &billingv1.User{Id: "mallory", Email: "bob@example.com"}})
	require.NoError(t, err)
	require.Nil(t, mine.GetSubscription())

	// The credential alone names no user, whatever the body says.
	_, err = c.GetSubscription(context.Background(), &billingv1.GetSubscriptionRequest{User: &billingv1.User{Id: "bob"}})
	code, why = reason(t, err)
	require.Equal(t, codes.Unauthenticated, code)
	require.Equal(t, "UNAUTHENTICATED", why)
}
