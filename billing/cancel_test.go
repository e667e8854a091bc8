package billing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/billing/internal/payments"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// scheduleYearly switches a monthly subscription to yearly at renewal and
// waits until billing shows the pending change.
func scheduleYearly(t *testing.T, c billingv1.BillingClient, user *billingv1.User) {
	t.Helper()
	_, err := c.UpdateSubscriptionRecurring(context.Background(), &billingv1.UpdateSubscriptionRecurringRequest{User: user, Recurring: billingv1.Recurring_RECURRING_YEARLY})
	require.NoError(t, err)
	awaitSubscription(t, c, user, func(s *billingv1.Subscription) bool {
		return s.GetPendingRecurring() == billingv1.Recurring_RECURRING_YEARLY
	}, "change of cycle scheduled")
}

// resumeRestoresYearly resumes a canceled subscription and checks that the
// switch to yearly is scheduled again, at billing and at Stripe, and that
// the renewal bills yearly.
func resumeRestoresYearly(t *testing.T, h *billingtest.Harness, c billingv1.BillingClient, user *billingv1.User, subID string) {
	t.Helper()
	resumed, err := c.ResumeSubscription(context.Background(), &billingv1.ResumeSubscriptionRequest{User: user})
	require.NoError(t, err)
	require.Nil(t, resumed.GetSubscription().GetCanceledAt())
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, resumed.GetSubscription().GetPendingRecurring(), "the scheduled switch to yearly is back")
	st, _ := h.Stripe.Subscription(subID)
	require.NotEmpty(t, st.ScheduleID, "a schedule holds the switch at Stripe")
	_, err = h.Stripe.Renew(subID)
	require.NoError(t, err)
	st, _ = h.Stripe.Subscription(subID)
	require.Equal(t, "pro_yearly", st.LookupKey, "the renewal is yearly")
}

// TestCancelFailingAfterTheReleaseKeepsTheScheduledChange: a cancel whose
// schedule was released at Stripe but whose cancellation then failed is
// retried successfully, with or without its idempotency key, before or after
// Stripe's event about the release lands, and resuming still brings the
// scheduled switch back.
func TestCancelFailingAfterTheReleaseKeepsTheScheduledChange(t *testing.T) {
	tests := []struct {
		name         string
		key          string
		webhookFirst bool
	}{
		{"retry", "", false},
		{"retry after the release's event", "", true},
		{"retry with the key", "cancel-1", false},
		{"retry with the key after the release's event", "cancel-1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := billingtest.Start(t, billingtest.Options{})
			c := edgeClient(h.Conn)
			ctx := context.Background()
			alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
			subID := subscribe(t, h, c, alice)
			scheduleYearly(t, c, alice)

			req := &billingv1.CancelSubscriptionRequest{User: alice, IdempotencyKey: tt.key}
			h.Stripe.FailNext(billingtest.OpSetCancel, billingtest.Unavailable())
			_, err := c.CancelSubscription(ctx, req)
			code, r := reason(t, err)
			require.Equal(t, codes.Unavailable, code)
			require.Equal(t, "PAYMENT_PROVIDER_UNAVAILABLE", r)
			st, _ := h.Stripe.Subscription(subID)
			require.Empty(t, st.ScheduleID, "precondition: the schedule was released before the cancellation failed")
			require.False(t, st.CancelAtPeriodEnd)

			if tt.webhookFirst {
				ingest(t, h, c, "customer.subscription.updated", subID)
				awaitSubscription(t, c, alice, func(s *billingv1.Subscription) bool {
					return s.GetPendingRecurring() == billingv1.Recurring_RECURRING_UNSPECIFIED
				}, "the release applied")
			}
			canceled, err := c.CancelSubscription(ctx, req)
			require.NoError(t, err, "the retry completes the cancel")
			require.NotNil(t, canceled.GetSubscription().GetCanceledAt())
			st, _ = h.Stripe.Subscription(subID)
			require.True(t, st.CancelAtPeriodEnd)
			ingest(t, h, c, "customer.subscription.updated", subID)
			awaitSubscription(t, c, alice, func(s *billingv1.Subscription) bool { return s.GetCanceledAt() != nil }, "cancel applied")

			resumeRestoresYearly(t, h, c, alice, subID)
		})
	}
}

// TestCancelKeepsTheScheduledChangeWhenANewerReadLandsFirst: Stripe's event
// about the cancellation is applied (with a newer read) while the cancel's
// own read of the subscription is still under way; the change the cancel
// dropped from Stripe is still remembered.
func TestCancelKeepsTheScheduledChangeWhenANewerReadLandsFirst(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subID := subscribe(t, h, c, alice)
	scheduleYearly(t, c, alice)

	gate := h.Stripe.Hold(billingtest.OpGetSubscription)
	defer gate.Release()
	type answer struct {
		resp *billingv1.CancelSubscriptionResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := c.CancelSubscription(context.Background(), &billingv1.CancelSubscriptionRequest{User: alice})
		done <- answer{resp, err}
	}()
	<-gate.Entered() // canceled at Stripe; the cancel's own read is held
	ingest(t, h, c, "customer.subscription.updated", subID)
	awaitSubscription(t, c, alice, func(s *billingv1.Subscription) bool { return s.GetCanceledAt() != nil }, "the event's read stored first")
	gate.Release()
	got := <-done
	require.NoError(t, got.err)
	require.NotNil(t, got.resp.GetSubscription().GetCanceledAt())

	resumeRestoresYearly(t, h, c, alice, subID)
}

// TestChangeOfCycleAfterAFailedCancelReplacesTheRememberedOne: once the
// user picks a cycle again after a failed cancel, the change that cancel
// remembered no longer comes back on resume.
func TestChangeOfCycleAfterAFailedCancelReplacesTheRememberedOne(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subID := subscribe(t, h, c, alice)
	scheduleYearly(t, c, alice)
	h.Stripe.FailNext(billingtest.OpSetCancel, billingtest.Unavailable())
	_, err := c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice})
	require.Error(t, err)
	ingest(t, h, c, "customer.subscription.updated", subID)
	awaitSubscription(t, c, alice, func(s *billingv1.Subscription) bool {
		return s.GetPendingRecurring() == billingv1.Recurring_RECURRING_UNSPECIFIED
	}, "the release applied")

	scheduleYearly(t, c, alice)
	monthly, err := c.UpdateSubscriptionRecurring(ctx, &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY})
	require.NoError(t, err)
	require.Equal(t, billingv1.Recurring_RECURRING_UNSPECIFIED, monthly.GetSubscription().GetPendingRecurring())

	_, err = c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice})
	require.NoError(t, err)
	resumed, err := c.ResumeSubscription(ctx, &billingv1.ResumeSubscriptionRequest{User: alice})
	require.NoError(t, err)
	require.Equal(t, billingv1.Recurring_RECURRING_UNSPECIFIED, resumed.GetSubscription().GetPendingRecurring(), "monthly, as last chosen")
	st, _ := h.Stripe.Subscription(subID)
	require.Empty(t, st.ScheduleID)
}

// TestCancelWithAChangeOfCycleBillingHasNotSeen: a switch to yearly made
// at Stripe (in the billing portal) whose event billing has not applied
// does not stop a cancel: the schedule Stripe reports is released, the
// subscription is canceled at the period's end, and resuming brings the
// switch to yearly back.
func TestCancelWithAChangeOfCycleBillingHasNotSeen(t *testing.T) {
	h, c, alice, subID := portalSwitchToYearly(t)
	ctx := context.Background()

	canceled, err := c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice})
	require.NoError(t, err)
	require.NotNil(t, canceled.GetSubscription().GetCanceledAt())
	st, _ := h.Stripe.Subscription(subID)
	require.True(t, st.CancelAtPeriodEnd, "canceled at Stripe")
	require.Empty(t, st.ScheduleID, "the schedule billing had not seen is released")
	resumeRestoresYearly(t, h, c, alice, subID)
}

// TestCancelRefusedByStripe: a refusal Stripe keeps answering (a 4xx)
// reaches the user as PAYMENT_PROVIDER_REFUSED (409), without Stripe's
// words, not as an internal error.
func TestCancelRefusedByStripe(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subscribe(t, h, c, alice)
	refusal := &payments.APIError{Status: 400, Type: "invalid_request_error", Message: "stripe says no"}
	h.Stripe.FailNext(billingtest.OpSetCancel, refusal)
	h.Stripe.FailNext(billingtest.OpSetCancel, refusal)

	_, err := c.CancelSubscription(ctx, &billingv1.CancelSubscriptionRequest{User: alice})
	code, r := reason(t, err)
	require.Equal(t, "PAYMENT_PROVIDER_REFUSED", r)
	require.Equal(t, codes.FailedPrecondition, code)
	require.Equal(t, "409", httpStatusOf(t, err))
	require.NotContains(t, err.Error(), "stripe says no")
	got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: alice})
	require.NoError(t, err)
	require.Nil(t, got.GetSubscription().GetCanceledAt(), "not canceled")
}

// TestResumeWithAChangeBillingHasNotSeen: a resume Stripe refuses because
// billing's copy lags behind (events not applied yet) is decided again on
// what Stripe holds. A subscription already resumed and switched to yearly
// in the billing portal answers as it is, not an error, its schedule kept;
// one still canceled under a schedule billing has not seen has that
// schedule released, is resumed, and keeps its switch to yearly. A refusal
// that remains after the second attempt, made with a fresh Stripe
// idempotency key, answers PAYMENT_PROVIDER_REFUSED.
func TestResumeWithAChangeBillingHasNotSeen(t *testing.T) {
	canceled := func(t *testing.T) (*billingtest.Harness, billingv1.BillingClient, *billingv1.User, string) {
		h := billingtest.Start(t, billingtest.Options{})
		c := edgeClient(h.Conn)
		alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
		subID := subscribe(t, h, c, alice)
		_, err := c.CancelSubscription(context.Background(), &billingv1.CancelSubscriptionRequest{User: alice})
		require.NoError(t, err)
		return h, c, alice, subID
	}

	t.Run("resumed and switched in the portal", func(t *testing.T) {
		h, c, alice, subID := canceled(t)
		ctx := context.Background()
		_, err := h.Stripe.SetCancelAtPeriodEnd(ctx, subID, false, "portal-renew")
		require.NoError(t, err)
		schedule := scheduleYearlyAtStripe(t, h, subID)

		resumed, err := c.ResumeSubscription(ctx, &billingv1.ResumeSubscriptionRequest{User: alice})
		require.NoError(t, err)
		require.Nil(t, resumed.GetSubscription().GetCanceledAt())
		require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, resumed.GetSubscription().GetRecurring(), "the portal's switch to yearly")
		st, _ := h.Stripe.Subscription(subID)
		require.False(t, st.CancelAtPeriodEnd)
		require.Equal(t, schedule, st.ScheduleID, "the portal's schedule is kept")
	})

	t.Run("a schedule billing has not seen", func(t *testing.T) {
		h, c, alice, subID := canceled(t)
		schedule := scheduleYearlyAtStripe(t, h, subID)

		resumeRestoresYearly(t, h, c, alice, subID)
		sch, err := h.Stripe.GetSchedule(context.Background(), schedule)
		require.NoError(t, err)
		require.Equal(t, "released", sch.Status, "the schedule billing had not seen is released")
	})

	t.Run("a refusal that remains", func(t *testing.T) {
		h, c, alice, _ := canceled(t)
		refusal := &payments.APIError{Status: 400, Type: "invalid_request_error", Message: "stripe says no"}
		h.Stripe.FailNext(billingtest.OpSetCancel, refusal)
		h.Stripe.FailNext(billingtest.OpSetCancel, refusal)
		before := len(h.Stripe.Calls())

		_, err := c.ResumeSubscription(context.Background(), &billingv1.ResumeSubscriptionRequest{User: alice, IdempotencyKey: "resume-1"})
		code, r := reason(t, err)
		require.Equal(t, "PAYMENT_PROVIDER_REFUSED", r)
		require.Equal(t, codes.FailedPrecondition, code)
		var keys []string
		for _, call := range h.Stripe.Calls()[before:] {
			if call.Op == billingtest.OpSetCancel {
				keys = append(keys, call.IdempotencyKey)
			}
		}
		require.Len(t, keys, 2, "tried once more after reading the subscription again")
		require.NotEqual(t, keys[0], keys[1], "with a fresh Stripe idempotency key")
	})
}
