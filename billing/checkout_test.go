package billing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/billing/internal/payments"
	"github.com/switchboardhq/switchboard/billing/internal/payments/paymentstest"
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

// TestCheckoutRefusedOncePaidBeforeTheWebhook: a user who paid and checks
// out again before Stripe's webhooks reached billing is refused as if
// billing knew, and Stripe holds one subscription.
func TestCheckoutRefusedOncePaidBeforeTheWebhook(t *testing.T) {
	tests := []struct {
		name         string
		trialDays    int
		stripeStatus string // set at Stripe after paying, "" to keep
		message      string
	}{
		{"active", 0, "", "You already have a subscription"},
		{"trialing", 14, "", "You already have a subscription"},
		{"past_due", 0, "past_due", "billing portal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := billingtest.Start(t, billingtest.Options{})
			c := edgeClient(h.Conn)
			ctx := context.Background()
			alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
			first, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY})
			require.NoError(t, err)
			sess, ok := h.Stripe.SessionByURL(first.GetUrl())
			require.True(t, ok)
			sub, _, err := h.Stripe.CompleteCheckout(sess.ID, tt.trialDays)
			require.NoError(t, err)
			if tt.stripeStatus != "" {
				_, err = h.Stripe.SetSubscription(sub.ID, func(s *payments.Subscription) { s.Status = tt.stripeStatus })
				require.NoError(t, err)
			}
			// No event handed to billing: it has not heard of the payment.
			got, err := c.GetSubscription(ctx, &billingv1.GetSubscriptionRequest{User: alice})
			require.NoError(t, err)
			require.Nil(t, got.GetSubscription(), "precondition: billing does not know yet")

			sessions := stripeCalls(h, billingtest.OpCreateCheckout)
			_, err = c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_YEARLY, IdempotencyKey: "again"})
			code, r := reason(t, err)
			require.Equal(t, codes.AlreadyExists, code)
			require.Equal(t, "SUBSCRIPTION_ALREADY_EXISTS", r)
			require.Contains(t, status.Convert(err).Message(), tt.message)
			require.Equal(t, sessions, stripeCalls(h, billingtest.OpCreateCheckout), "no checkout session at Stripe")
			subs, err := h.Stripe.ListSubscriptions(ctx, sess.CustomerID)
			require.NoError(t, err)
			require.Len(t, subs, 1, "one subscription at Stripe")
		})
	}
}

// openSessions lists the user's payable checkout sessions at the fake
// Stripe.
func openSessions(t *testing.T, h *billingtest.Harness, customerID string) []payments.CheckoutSession {
	t.Helper()
	open, err := h.Stripe.ListOpenCheckoutSessions(context.Background(), customerID)
	require.NoError(t, err)
	return open
}

// TestOnlyTheLastCheckoutCanBePaid: a user who checks out in two tabs can
// pay only in the second; the first tab's page is expired. Retrying the
// second with its key answers its page again and keeps it payable.
func TestOnlyTheLastCheckoutCanBePaid(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	tab1, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "tab-1"})
	require.NoError(t, err)
	tab2req := &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_YEARLY, IdempotencyKey: "tab-2"}
	tab2, err := c.Checkout(ctx, tab2req)
	require.NoError(t, err)
	require.NotEqual(t, tab1.GetUrl(), tab2.GetUrl())
	again, err := c.Checkout(ctx, tab2req)
	require.NoError(t, err)
	require.Equal(t, tab2.GetUrl(), again.GetUrl(), "the retry answers the second page")

	s1, ok := h.Stripe.SessionByURL(tab1.GetUrl())
	require.True(t, ok)
	s2, ok := h.Stripe.SessionByURL(tab2.GetUrl())
	require.True(t, ok)
	require.Equal(t, []payments.CheckoutSession{s2}, openSessions(t, h, s2.CustomerID))
	_, _, err = h.Stripe.CompleteCheckout(s1.ID, 0)
	require.Error(t, err, "the first tab's page cannot be paid")
	sub, _, err := h.Stripe.CompleteCheckout(s2.ID, 0)
	require.NoError(t, err, "the second tab's page can")
	require.Equal(t, "pro_yearly", sub.LookupKey)
}

// TestCheckoutRetriedAfterAFailureKeepsItsSession: a checkout whose
// session was created at Stripe but which failed afterwards is retried
// with its key: the retry answers that session's page and does not expire
// it; the earlier checkout's page stays expired.
func TestCheckoutRetriedAfterAFailureKeepsItsSession(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	tab1, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "tab-1"})
	require.NoError(t, err)
	s1, ok := h.Stripe.SessionByURL(tab1.GetUrl())
	require.True(t, ok)

	// The second checkout's session is created, then Stripe goes away.
	sessions := stripeCalls(h, billingtest.OpCreateCheckout)
	h.Stripe.FailNext(billingtest.OpListCheckouts, nil)
	h.Stripe.FailNext(billingtest.OpListCheckouts, billingtest.Unavailable())
	tab2req := &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "tab-2"}
	_, err = c.Checkout(ctx, tab2req)
	require.Equal(t, "PAYMENT_PROVIDER_UNAVAILABLE", reasonOf(t, err))
	require.Equal(t, sessions+1, stripeCalls(h, billingtest.OpCreateCheckout), "precondition: the session was created before the failure")
	open := openSessions(t, h, s1.CustomerID)
	require.Len(t, open, 1)
	s2 := open[0]
	require.NotEqual(t, s1.ID, s2.ID)

	tab2, err := c.Checkout(ctx, tab2req)
	require.NoError(t, err)
	require.Equal(t, s2.URL, tab2.GetUrl(), "the retry answers the session created first")
	require.Equal(t, []payments.CheckoutSession{s2}, openSessions(t, h, s1.CustomerID), "and keeps it payable")
	_, _, err = h.Stripe.CompleteCheckout(s1.ID, 0)
	require.Error(t, err)
	_, _, err = h.Stripe.CompleteCheckout(s2.ID, 0)
	require.NoError(t, err)
}

// checkoutAnswer is a checkout's answer.
type checkoutAnswer struct {
	resp *billingv1.CheckoutResponse
	err  error
}

// heldCheckout starts req's checkout and returns once it is held at the
// creation of its session (released by gate.Release), with the channel
// its answer comes on.
func heldCheckout(t *testing.T, h *billingtest.Harness, c billingv1.BillingClient, req *billingv1.CheckoutRequest) (*paymentstest.Gate, <-chan checkoutAnswer) {
	t.Helper()
	gate := h.Stripe.Hold(billingtest.OpCreateCheckout)
	t.Cleanup(gate.Release)
	held := make(chan checkoutAnswer, 1)
	go func() {
		resp, err := c.Checkout(context.Background(), req)
		held <- checkoutAnswer{resp, err}
	}()
	<-gate.Entered()
	return gate, held
}

// TestCheckoutsAtOnceLeaveOnePayable: two checkouts of one user running at
// the same moment (a double click) both answer a page, and only the newer
// session can be paid.
func TestCheckoutsAtOnceLeaveOnePayable(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	req := &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY}

	gate, held := heldCheckout(t, h, c, req) // passed its checks, its session not created yet
	early, err := c.Checkout(ctx, req)
	require.NoError(t, err)
	gate.Release()
	late := <-held
	require.NoError(t, late.err)

	sEarly, ok := h.Stripe.SessionByURL(early.GetUrl())
	require.True(t, ok)
	sLate, ok := h.Stripe.SessionByURL(late.resp.GetUrl())
	require.True(t, ok)
	require.Equal(t, []payments.CheckoutSession{sLate}, openSessions(t, h, sEarly.CustomerID), "one page can be paid: the newer")
	_, _, err = h.Stripe.CompleteCheckout(sEarly.ID, 0)
	require.Error(t, err)
	_, _, err = h.Stripe.CompleteCheckout(sLate.ID, 0)
	require.NoError(t, err)
}

// TestPaidWhileAnotherCheckoutCreatesItsSession: a checkout whose session
// is being created while the user pays another tab's page does not answer
// a second payable page: the payment is seen, the new session expired,
// and the checkout refused.
func TestPaidWhileAnotherCheckoutCreatesItsSession(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	gate, held := heldCheckout(t, h, c, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "tab-b"})
	a, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: billingv1.Recurring_RECURRING_MONTHLY, IdempotencyKey: "tab-a"})
	require.NoError(t, err)
	sA, ok := h.Stripe.SessionByURL(a.GetUrl())
	require.True(t, ok)
	_, _, err = h.Stripe.CompleteCheckout(sA.ID, 0)
	require.NoError(t, err, "tab A paid")
	gate.Release()
	b := <-held
	require.Error(t, b.err, "tab B answered a page: %v", b.resp)
	_, r := reason(t, b.err)
	require.Equal(t, "SUBSCRIPTION_ALREADY_EXISTS", r)
	open, err := h.Stripe.ListOpenCheckoutSessions(ctx, sA.CustomerID)
	require.NoError(t, err)
	require.Empty(t, open, "tab B's session was expired")
}

// TestCheckoutRetriedAfterANewerOne: a checkout retried with its key after
// a newer checkout of the user expired its page never answers that expired
// page: it answers the newer page when that sells the same plan and cycle,
// SUBSCRIPTION_ALREADY_EXISTS once the newer page was paid, and else
// CHECKOUT_EXPIRED, after which a checkout with a new key gets a page. The
// newer page stays payable and no session is created by the retry.
func TestCheckoutRetriedAfterANewerOne(t *testing.T) {
	monthly, yearly := billingv1.Recurring_RECURRING_MONTHLY, billingv1.Recurring_RECURRING_YEARLY
	tests := []struct {
		name       string
		newer      billingv1.Recurring
		payNewer   bool
		wantNewer  bool   // the retry answers the newer page
		wantReason string // else its error
		wantCode   codes.Code
	}{
		{"same plan and cycle", monthly, false, true, "", codes.OK},
		{"another cycle", yearly, false, false, "CHECKOUT_EXPIRED", codes.FailedPrecondition},
		{"newer one paid", monthly, true, false, "SUBSCRIPTION_ALREADY_EXISTS", codes.AlreadyExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := billingtest.Start(t, billingtest.Options{})
			c := edgeClient(h.Conn)
			ctx := context.Background()
			alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
			tab1req := &billingv1.CheckoutRequest{User: alice, Recurring: monthly, IdempotencyKey: "tab-1"}
			tab1, err := c.Checkout(ctx, tab1req)
			require.NoError(t, err)
			tab2, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: tt.newer, IdempotencyKey: "tab-2"})
			require.NoError(t, err)
			s1, ok := h.Stripe.SessionByURL(tab1.GetUrl())
			require.True(t, ok)
			require.Equal(t, "expired", s1.Status, "precondition: the newer checkout expired the first page")
			s2, ok := h.Stripe.SessionByURL(tab2.GetUrl())
			require.True(t, ok)
			if tt.payNewer {
				_, _, err = h.Stripe.CompleteCheckout(s2.ID, 0)
				require.NoError(t, err)
			}

			sessions := stripeCalls(h, billingtest.OpCreateCheckout)
			again, err := c.Checkout(ctx, tab1req)
			require.Equal(t, sessions, stripeCalls(h, billingtest.OpCreateCheckout), "no session created by the retry")
			if tt.wantNewer {
				require.NoError(t, err)
				require.Equal(t, tab2.GetUrl(), again.GetUrl(), "the retry answers the newer page")
				require.Equal(t, []payments.CheckoutSession{s2}, openSessions(t, h, s1.CustomerID), "which stays payable")
				return
			}
			code, r := reason(t, err)
			require.Equal(t, tt.wantCode, code, "the retry answers no page: %v", again)
			require.Equal(t, tt.wantReason, r)
			if tt.payNewer {
				return
			}
			require.Equal(t, "410", httpStatusOf(t, err))
			require.Equal(t, []payments.CheckoutSession{s2}, openSessions(t, h, s1.CustomerID), "the newer page stays payable")
			_, err = c.Checkout(ctx, tab1req)
			require.Equal(t, "CHECKOUT_EXPIRED", reasonOf(t, err), "a second retry answers the same")

			fresh, err := c.Checkout(ctx, &billingv1.CheckoutRequest{User: alice, Recurring: monthly, IdempotencyKey: "tab-1-again"})
			require.NoError(t, err, "a checkout with a new key gets a page")
			s3, ok := h.Stripe.SessionByURL(fresh.GetUrl())
			require.True(t, ok)
			require.Equal(t, "open", s3.Status)
		})
	}
}
