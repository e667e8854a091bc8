package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

func reason(t *testing.T, err error) (codes.Code, string) {
	t.Helper()
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

// httpStatusOf is the HTTP status billing's error tells the edge to answer.
func httpStatusOf(t *testing.T, err error) string {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetMetadata()["http_status"]
		}
	}
	return ""
}

// paramOf is the request parameter billing's error names.
func paramOf(t *testing.T, err error) string {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetMetadata()["param"]
		}
	}
	return ""
}

func TestNotConfigured(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{Unconfigured: true})
	c := billingv1.NewBillingClient(h.Conn)
	ctx := context.Background()
	user := &billingv1.User{Id: "u"}
	calls := map[string]func() error{
		"Checkout": func() error {
			_, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: user, Recurring: billingv1.Recurring_RECURRING_MONTHLY})
			return err
		},
		"Portal": func() error {
			_, err := c.CreateCustomerPortal(ctx, &billingv1.CreateCustomerPortalRequest{User: user})
			return err
		},
		"Cancel": func() error {
			_, err := c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: user})
			return err
		},
		"Resume": func() error {
			_, err := c.ResumeSubscription(ctx, &billingv1.ResumeSubscriptionRequest{User: user})
			return err
		},
		"Update": func() error {
			_, err := c.UpdateSubscriptionRecurring(ctx, &billingv1.UpdateSubscriptionRecurringRequest{User: user})
			return err
		},
		"Get": func() error {
			_, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: user})
			return err
		},
		"List":    func() error { _, err := c.ListInvoices(ctx, &billingv1.ListInvoicesRequest{User: user}); return err },
		"Count":   func() error { _, err := c.CountInvoices(ctx, &billingv1.CountInvoicesRequest{User: user}); return err },
		"Prices":  func() error { _, err := c.ListPrices(ctx, &billingv1.ListPricesRequest{}); return err },
		"Webhook": func() error { _, err := c.IngestWebhook(ctx, &billingv1.IngestWebhookRequest{}); return err },
	}
	for name, call := range calls {
		code, r := reason(t, call())
		require.Equal(t, codes.FailedPrecondition, code, name)
		require.Equal(t, "BILLING_NOT_CONFIGURED", r, name)
	}
}

func TestUserRequired(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := billingv1.NewBillingClient(h.Conn)
	_, err := c.GetSubscription(context.Background(), &billingv1.GetSubscriptionRequest{})
	code, r := reason(t, err)
	require.Equal(t, codes.Unauthenticated, code)
	require.Equal(t, "UNAUTHENTICATED", r)
}

// TestReconcile: a change at Stripe whose event never arrived is picked up
// by reconciliation.
func TestReconcile(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := billingv1.NewBillingClient(h.Conn)
	ctx := rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "alice", Email: "a@example.com"})
	user := &billingv1.User{Id: "alice", Email: "a@example.com"}
	resp, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: user, Recurring: billingv1.Recurring_RECURRING_YEARLY})
	require.NoError(t, err)
	sess, ok := h.Stripe.SessionByURL(resp.GetUrl())
	require.True(t, ok)
	sub, _, err := h.Stripe.CompleteCheckout(sess.ID, 14)
	require.NoError(t, err)
	payload := h.Stripe.Event("checkout.session.completed", sess.ID)
	_, err = c.IngestWebhook(ctx, &billingv1.IngestWebhookRequest{Payload: payload, Signature: billingtest.Sign(payload)})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: user})
		return err == nil && got.GetSubscription().GetStatus() == billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_TRIALING
	}, 10*time.Second, 5*time.Millisecond)
	got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: user})
	require.NoError(t, err)
	require.NotNil(t, got.GetSubscription().GetTrialEnd())
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, got.GetSubscription().GetRecurring())

	_, err = h.Stripe.SetSubscription(sub.ID, billingtest.EndSubscription(time.Now()))
	require.NoError(t, err)
	require.NoError(t, h.Billing.Reconcile(ctx))
	got, err = c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: user})
	require.NoError(t, err)
	require.Equal(t, billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_CANCELED, got.GetSubscription().GetStatus())
	require.Nil(t, got.GetSubscription().GetNextBillAt())
}
