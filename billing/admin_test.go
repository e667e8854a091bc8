package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// subscribeUser checks a user out through billing and delivers the checkout's
// webhook, and returns the subscription id once billing applied it and
// counted it applied (the state shows before the count moves).
func subscribeUser(t *testing.T, h *billingtest.Harness, userID string, recurring billingv1.Recurring) string {
	t.Helper()
	c := billingv1.NewBillingClient(h.Conn)
	ctx := rpcauth.VouchUser(context.Background(), rpcauth.User{ID: userID, Email: userID + "@example.com"})
	resp, err := c.Checkout(ctx, &billingv1.CheckoutRequest{Recurring: recurring})
	require.NoError(t, err)
	sess, ok := h.Stripe.SessionByURL(resp.GetUrl())
	require.True(t, ok)
	sub, _, err := h.Stripe.CompleteCheckout(sess.ID, 0)
	require.NoError(t, err)
	applied := h.Billing.EventStats().Applied
	deliver(t, h, h.Stripe.Event("checkout.session.completed", sess.ID))
	require.Eventually(t, func() bool {
		got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{})
		return err == nil && got.GetSubscription().GetId() == sub.ID && h.Billing.EventStats().Applied == applied+1
	}, 10*time.Second, 5*time.Millisecond, "subscription applied")
	return sub.ID
}

func deliver(t *testing.T, h *billingtest.Harness, payload []byte) {
	t.Helper()
	_, err := billingv1.NewBillingClient(h.Conn).IngestWebhook(context.Background(),
		&billingv1.IngestWebhookRequest{Payload: payload, Signature: billingtest.Sign(payload)})
	require.NoError(t, err)
}

func TestAdminListSubscriptions(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := billingv1.NewBillingClient(h.Conn)
	admin := rpcauth.VouchAdmin(context.Background())

	empty, err := c.ListSubscriptions(admin, &billingv1.ListSubscriptionsRequest{})
	require.NoError(t, err)
	require.Empty(t, empty.GetSubscriptions())
	require.Zero(t, empty.GetTotal())

	aliceSub := subscribeUser(t, h, "alice", billingv1.Recurring_RECURRING_MONTHLY)
	bobSub := subscribeUser(t, h, "bob", billingv1.Recurring_RECURRING_YEARLY)

	all, err := c.ListSubscriptions(admin, &billingv1.ListSubscriptionsRequest{})
	require.NoError(t, err)
	require.EqualValues(t, 2, all.GetTotal())
	require.Len(t, all.GetSubscriptions(), 2)
	byUser := map[string]*billingv1.UserSubscription{}
	for _, s := range all.GetSubscriptions() {
		byUser[s.GetUserId()] = s
	}
	require.Equal(t, aliceSub, byUser["alice"].GetSubscription().GetId())
	require.Equal(t, bobSub, byUser["bob"].GetSubscription().GetId())
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, byUser["bob"].GetSubscription().GetRecurring())
	require.Equal(t, billingv1.Plan_PLAN_PRO, byUser["alice"].GetSubscription().GetPlan())
	require.Equal(t, billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_ACTIVE, byUser["alice"].GetSubscription().GetStatus())
	require.NotNil(t, byUser["alice"].GetSubscription().GetEnd(), "the period end is shown")
	require.False(t, byUser["alice"].GetCancelAtPeriodEnd())

	// Pages: one at a time, in the same order.
	for i, want := range all.GetSubscriptions() {
		p, err := c.ListSubscriptions(admin, &billingv1.ListSubscriptionsRequest{Take: 1, Skip: int32(i)})
		require.NoError(t, err)
		require.Len(t, p.GetSubscriptions(), 1)
		require.Equal(t, want.GetSubscription().GetId(), p.GetSubscriptions()[0].GetSubscription().GetId())
		require.EqualValues(t, 2, p.GetTotal())
	}
	past, err := c.ListSubscriptions(admin, &billingv1.ListSubscriptionsRequest{Skip: 5})
	require.NoError(t, err)
	require.Empty(t, past.GetSubscriptions())

	// A cancellation shows as cancel at period end.
	_, err = c.CancelSubscription(rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "alice"}), &billingv1.CancelSubscriptionRequest{})
	require.NoError(t, err)
	all, err = c.ListSubscriptions(admin, &billingv1.ListSubscriptionsRequest{})
	require.NoError(t, err)
	for _, s := range all.GetSubscriptions() {
		require.Equal(t, s.GetUserId() == "alice", s.GetCancelAtPeriodEnd(), s.GetUserId())
	}

	_, err = c.ListSubscriptions(admin, &billingv1.ListSubscriptionsRequest{Take: 101})
	code, r := reason(t, err)
	require.Equal(t, codes.InvalidArgument, code)
	require.Equal(t, "BAD_REQUEST", r)
	require.Equal(t, "take", paramOf(t, err), "the field at fault is named")
	_, err = c.ListSubscriptions(admin, &billingv1.ListSubscriptionsRequest{Skip: -1})
	require.Equal(t, "skip", paramOf(t, err), "the field at fault is named")
}

func TestAdminDeadLettersListedAndRetried(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{MaxDeliver: 2})
	c := billingv1.NewBillingClient(h.Conn)
	admin := rpcauth.VouchAdmin(context.Background())
	subID := subscribeUser(t, h, "alice", billingv1.Recurring_RECURRING_MONTHLY)
	applied := h.Billing.EventStats().Applied

	// Stripe keeps failing while the event is applied: it is set aside.
	for range 2 {
		h.Stripe.FailNext(billingtest.OpGetSubscription, billingtest.Unavailable())
	}
	payload := h.Stripe.Event("customer.subscription.updated", subID)
	deliver(t, h, payload)
	require.Eventually(t, func() bool { return h.Billing.EventStats().DeadLettered == 1 }, 10*time.Second, 5*time.Millisecond)

	list, err := c.ListDeadEvents(admin, &billingv1.ListDeadEventsRequest{})
	require.NoError(t, err)
	require.EqualValues(t, 1, list.GetTotal())
	require.Len(t, list.GetEvents(), 1)
	dead := list.GetEvents()[0]
	require.Equal(t, "customer.subscription.updated", dead.GetType())
	require.NotEmpty(t, dead.GetEventId())
	require.Equal(t, dead.GetEventId(), dead.GetId())
	require.EqualValues(t, 2, dead.GetAttempts())
	require.Contains(t, dead.GetLastError(), "stripe is unavailable")
	require.NotNil(t, dead.GetFailedAt())

	// Retried with Stripe back: applied, and no longer dead.
	got, err := c.RetryDeadEvent(admin, &billingv1.RetryDeadEventRequest{Id: dead.GetId()})
	require.NoError(t, err)
	require.Equal(t, dead.GetEventId(), got.GetEventId())
	require.Eventually(t, func() bool { return h.Billing.EventStats().Applied == applied+1 }, 10*time.Second, 5*time.Millisecond, "applied on retry")
	list, err = c.ListDeadEvents(admin, &billingv1.ListDeadEventsRequest{})
	require.NoError(t, err)
	require.Empty(t, list.GetEvents())
	require.Empty(t, h.DeadEvents())

	// A second retry of the same id finds nothing.
	_, err = c.RetryDeadEvent(admin, &billingv1.RetryDeadEventRequest{Id: dead.GetId()})
	code, r := reason(t, err)
	require.Equal(t, codes.NotFound, code)
	require.Equal(t, "DEAD_LETTER_NOT_FOUND", r)
	_, err = c.RetryDeadEvent(admin, &billingv1.RetryDeadEventRequest{Id: "../x"})
	code, _ = reason(t, err)
	require.Equal(t, codes.NotFound, code)

	// Failing again after a retry puts it back.
	for range 2 {
		h.Stripe.FailNext(billingtest.OpGetSubscription, billingtest.Unavailable())
	}
	deliver(t, h, h.Stripe.Event("customer.subscription.updated", subID))
	require.Eventually(t, func() bool { return h.Billing.EventStats().DeadLettered == 2 }, 10*time.Second, 5*time.Millisecond)
	list, err = c.ListDeadEvents(admin, &billingv1.ListDeadEventsRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetEvents(), 1)
}

// TestAdminMethodsRefused: the operator methods answer only a caller the
// edge marked as an admin, never one acting for a user.
func TestAdminMethodsRefused(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := billingv1.NewBillingClient(h.Conn)
	subscribeUser(t, h, "alice", billingv1.Recurring_RECURRING_MONTHLY)
	cases := map[string]context.Context{
		"no admin flag": context.Background(),
		"a user":        rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "alice"}),
		"admin and a user": metadata.AppendToOutgoingContext(rpcauth.VouchAdmin(context.Background()),
			contract.MDUserID, "alice"),
		"admin flag not 1": metadata.AppendToOutgoingContext(context.Background(), contract.MDAdmin, "true"),
		"admin flag twice": metadata.AppendToOutgoingContext(context.Background(), contract.MDAdmin, "1", contract.MDAdmin, "1"),
		"admin with email": metadata.AppendToOutgoingContext(rpcauth.VouchAdmin(context.Background()), contract.MDUserEmail, "a@example.com"),
	}
	for name, ctx := range cases {
		t.Run(name, func(t *testing.T) {
			calls := map[string]func() error{
				"ListSubscriptions": func() error {
					_, err := c.ListSubscriptions(ctx, &billingv1.ListSubscriptionsRequest{})
					return err
				},
				"ListDeadEvents": func() error {
					_, err := c.ListDeadEvents(ctx, &billingv1.ListDeadEventsRequest{})
					return err
				},
				"RetryDeadEvent": func() error {
					_, err := c.RetryDeadEvent(ctx, &billingv1.RetryDeadEventRequest{Id: "evt_x"})
					return err
				},
			}
			for method, call := range calls {
				code, r := reason(t, call())
				require.Equal(t, codes.PermissionDenied, code, method)
				require.Equal(t, "ADMIN_REQUIRED", r, method)
			}
		})
	}
}

func TestAdminNotConfigured(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{Unconfigured: true})
	c := billingv1.NewBillingClient(h.Conn)
	_, err := c.ListSubscriptions(rpcauth.VouchAdmin(context.Background()), &billingv1.ListSubscriptionsRequest{})
	code, r := reason(t, err)
	require.Equal(t, codes.FailedPrecondition, code)
	require.Equal(t, "BILLING_NOT_CONFIGURED", r)
	_, err = c.ListDeadEvents(rpcauth.VouchAdmin(context.Background()), &billingv1.ListDeadEventsRequest{})
	code, r = reason(t, err)
	require.Equal(t, codes.FailedPrecondition, code)
	require.Equal(t, "BILLING_NOT_CONFIGURED", r)
}
