package billing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// TestRecurringShowsTheChosenCycle: after a switch to yearly, recurring is
// Yearly in the answer and in the subscription read afterwards, with the
// cycle billed now (Monthly) and the change's date beside it; choosing
// monthly again releases the schedule and shows Monthly, and choosing the
// cycle already chosen is SAME_SUBSCRIPTION_RECURRING both times.
func TestRecurringShowsTheChosenCycle(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subID := subscribe(t, h, c, alice)
	change := func(r billingv1.Recurring) (*billingv1.Subscription, error) {
		resp, err := c.UpdateSubscriptionRecurring(ctx, &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: r})
		return resp.GetSubscription(), err
	}
	current := func() *billingv1.Subscription {
		got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: alice})
		require.NoError(t, err)
		return got.GetSubscription()
	}
	monthly, yearly := billingv1.Recurring_RECURRING_MONTHLY, billingv1.Recurring_RECURRING_YEARLY

	s := current()
	require.Equal(t, monthly, s.GetRecurring())
	require.Equal(t, monthly, s.GetBilledRecurring())
	_, err := change(monthly)
	require.Equal(t, "SAME_SUBSCRIPTION_RECURRING", reasonOf(t, err))

	changed, err := change(yearly)
	require.NoError(t, err)
	for name, s := range map[string]*billingv1.Subscription{"answer": changed, "read afterwards": current()} {
		require.Equal(t, yearly, s.GetRecurring(), "%s: recurring is the chosen cycle", name)
		require.Equal(t, monthly, s.GetBilledRecurring(), "%s: billed monthly until the period ends", name)
		require.Equal(t, yearly, s.GetPendingRecurring(), name)
		require.Equal(t, s.GetEnd().AsTime(), s.GetRecurringChangesAt().AsTime(), "%s: the change takes effect at the period's end", name)
	}
	_, err = change(yearly)
	require.Equal(t, "SAME_SUBSCRIPTION_RECURRING", reasonOf(t, err))

	back, err := change(monthly)
	require.NoError(t, err)
	for name, s := range map[string]*billingv1.Subscription{"answer": back, "read afterwards": current()} {
		require.Equal(t, monthly, s.GetRecurring(), name)
		require.Equal(t, monthly, s.GetBilledRecurring(), name)
		require.Equal(t, billingv1.Recurring_RECURRING_UNSPECIFIED, s.GetPendingRecurring(), name)
		require.Nil(t, s.GetRecurringChangesAt(), name)
	}
	st, _ := h.Stripe.Subscription(subID)
	require.Empty(t, st.ScheduleID, "the schedule is released at Stripe")
	_, err = change(monthly)
	require.Equal(t, "SAME_SUBSCRIPTION_RECURRING", reasonOf(t, err))
}
