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

// TestSwitchToYearlyClickedTwice: two switches to yearly at once (a double
// click, no idempotency key) both answer Yearly, though Stripe refuses the
// second schedule; one schedule holds the switch.
func TestSwitchToYearlyClickedTwice(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subID := subscribe(t, h, c, alice)

	gate := h.Stripe.Hold(billingtest.OpScheduleChange)
	t.Cleanup(gate.Release)
	req := &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_YEARLY}
	type answer struct {
		resp *billingv1.UpdateSubscriptionRecurringResponse
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		resp, err := c.UpdateSubscriptionRecurring(ctx, req)
		first <- answer{resp, err}
	}()
	<-gate.Entered()
	second, err := c.UpdateSubscriptionRecurring(ctx, req)
	require.NoError(t, err, "second click")
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, second.GetSubscription().GetRecurring())
	gate.Release()
	a := <-first
	require.NoError(t, a.err, "first click")
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, a.resp.GetSubscription().GetRecurring())
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, a.resp.GetSubscription().GetPendingRecurring())
	st, _ := h.Stripe.Subscription(subID)
	sch, err := h.Stripe.GetSchedule(ctx, st.ScheduleID)
	require.NoError(t, err)
	require.Equal(t, "pro_yearly", sch.Phases[len(sch.Phases)-1].LookupKey, "the schedule switches to yearly")
}

// TestSwitchToYearlyAlreadyMadeInThePortal: a switch to yearly made in the
// billing portal, whose event billing has not applied, makes the same
// switch asked in the app answer Yearly, not an error.
func TestSwitchToYearlyAlreadyMadeInThePortal(t *testing.T) {
	_, c, alice, _ := portalSwitchToYearly(t)
	ctx := context.Background()

	resp, err := c.UpdateSubscriptionRecurring(ctx, &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_YEARLY})
	require.NoError(t, err)
	require.Equal(t, billingv1.Recurring_RECURRING_YEARLY, resp.GetSubscription().GetRecurring())
	require.Equal(t, billingv1.Recurring_RECURRING_MONTHLY, resp.GetSubscription().GetBilledRecurring())
}

// TestSwitchBackToMonthlyAfterASwitchInThePortal: after a switch to yearly
// made in the billing portal, whose event billing has not applied, asking
// for monthly in the app is decided on what Stripe holds, not answered
// SAME_SUBSCRIPTION_RECURRING from billing's copy: the schedule to yearly is
// released and the answer shows Monthly.
func TestSwitchBackToMonthlyAfterASwitchInThePortal(t *testing.T) {
	h, c, alice, subID := portalSwitchToYearly(t)
	ctx := context.Background()

	resp, err := c.UpdateSubscriptionRecurring(ctx, &billingv1.UpdateSubscriptionRecurringRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY})
	require.NoError(t, err)
	require.Equal(t, billingv1.Recurring_RECURRING_MONTHLY, resp.GetSubscription().GetRecurring())
	require.Equal(t, billingv1.Recurring_RECURRING_UNSPECIFIED, resp.GetSubscription().GetPendingRecurring())
	st, _ := h.Stripe.Subscription(subID)
	require.Empty(t, st.ScheduleID, "the schedule to yearly is released at Stripe")
	_, err = h.Stripe.Renew(subID)
	require.NoError(t, err)
	st, _ = h.Stripe.Subscription(subID)
	require.Equal(t, "pro_monthly", st.LookupKey, "the renewal stays monthly")
}

// portalSwitchToYearly subscribes alice monthly, then switches her to yearly
// at Stripe, as the billing portal does, without billing applying the event.
func portalSwitchToYearly(t *testing.T) (*billingtest.Harness, billingv1.BillingClient, *billingv1.User, string) {
	t.Helper()
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subID := subscribe(t, h, c, alice)
	scheduleYearlyAtStripe(t, h, subID)
	return h, c, alice, subID
}

// scheduleYearlyAtStripe switches a subscription to yearly at renewal at
// Stripe, as the billing portal does, without billing applying the event;
// it returns the schedule holding the switch.
func scheduleYearlyAtStripe(t *testing.T, h *billingtest.Harness, subID string) string {
	t.Helper()
	ctx := context.Background()
	prices, err := h.Stripe.ListPrices(ctx, []string{"pro_yearly"})
	require.NoError(t, err)
	sch, err := h.Stripe.ScheduleChange(ctx, subID, "", prices[0].ID, "portal-change")
	require.NoError(t, err)
	return sch.ID
}
