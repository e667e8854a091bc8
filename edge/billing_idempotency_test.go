package edge

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

// TestBillingRetriedMutationsReturnTheFirstAnswer is a frontend on a flaky
// network: each mutation is sent again with its idempotency key (argument or
// Idempotency-Key header) after the first answer was lost and the state has
// moved on (Stripe's webhooks landed), and gets the first answer.
func TestBillingRetriedMutationsReturnTheFirstAnswer(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")
	bob := e.token("bob", "b@example.com")

	// Checkout, paid, webhooks applied; then the retry.
	const checkout = `mutation($k: String) { checkout(recurring: Monthly, idempotencyKey: $k) }`
	var url, again string
	e.field(e.gql(alice, checkout, map[string]any{"k": "checkout-1"}), "checkout", &url)
	sess, ok := fake.SessionByURL(url)
	require.True(t, ok)
	sub, inv, err := fake.CompleteCheckout(sess.ID, 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sess.ID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.created", sub.ID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.paid", inv.ID)))
	e.eventually(func() bool {
		u := e.currentUser(alice, 8, 0)
		return u.Subscription != nil && u.Subscription.Status == "Active" && u.InvoiceCount == 1
	}, "subscribed")
	e.field(e.gql(alice, checkout, map[string]any{"k": "checkout-1"}), "checkout", &again)
	require.Equal(t, url, again, "not SUBSCRIPTION_ALREADY_EXISTS: the first answer")
	e.field(e.gql(alice, `mutation { checkout(recurring: Monthly) }`, nil, "Idempotency-Key", "checkout-1"), "checkout", &again)
	require.Equal(t, url, again, "the header is the same key")
	require.Equal(t, "SUBSCRIPTION_ALREADY_EXISTS", e.gql(alice, checkout, nil).code(), "without the key the guard answers")

	// Bob's "checkout-1" is his own key.
	var bobURL string
	e.field(e.gql(bob, checkout, map[string]any{"k": "checkout-1"}), "checkout", &bobURL)
	require.NotEqual(t, url, bobURL)
	bobSess, ok := fake.SessionByURL(bobURL)
	require.True(t, ok)
	require.Equal(t, "bob", bobSess.ClientReferenceID)

	// Portal.
	var portal, portalAgain string
	e.field(e.gql(alice, `mutation { createCustomerPortal }`, nil, "Idempotency-Key", "portal-1"), "createCustomerPortal", &portal)
	e.field(e.gql(alice, `mutation { createCustomerPortal(idempotencyKey: "portal-1") }`, nil), "createCustomerPortal", &portalAgain)
	require.Equal(t, portal, portalAgain)

	// Cancel; Stripe's update arrives; the retry.
	const cancel = `mutation($k: String) { cancelSubscription(idempotencyKey: $k) { ` + subscriptionFields + ` } }`
	var canceled, s subscriptionView
	e.field(e.gql(alice, cancel, map[string]any{"k": "cancel-1"}), "cancelSubscription", &canceled)
	require.NotNil(t, canceled.CanceledAt)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", sub.ID)))
	e.field(e.gql(alice, cancel, map[string]any{"k": "cancel-1"}), "cancelSubscription", &s)
	require.Equal(t, canceled, s, "not SUBSCRIPTION_HAS_BEEN_CANCELED: the first answer")

	// Resume, and its retry.
	const resume = `mutation($k: String) { resumeSubscription(idempotencyKey: $k) { ` + subscriptionFields + ` } }`
	var resumed subscriptionView
	e.field(e.gql(alice, resume, map[string]any{"k": "resume-1"}), "resumeSubscription", &resumed)
	require.Nil(t, resumed.CanceledAt)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", sub.ID)))
	e.field(e.gql(alice, resume, map[string]any{"k": "resume-1"}), "resumeSubscription", &s)
	require.Equal(t, resumed, s, "not SUBSCRIPTION_HAS_NOT_BEEN_CANCELED: the first answer")

	// The cancel retried once more, after the resume: answered as before,
	// and the subscription stays resumed.
	e.field(e.gql(alice, cancel, map[string]any{"k": "cancel-1"}), "cancelSubscription", &s)
	require.Equal(t, canceled, s)
	require.Nil(t, e.currentUser(alice, 8, 0).Subscription.CanceledAt, "the retry did not cancel again")

	// Change of cycle, and its retry.
	const update = `mutation($r: SubscriptionRecurring!, $k: String) { updateSubscriptionRecurring(recurring: $r, idempotencyKey: $k) { ` + subscriptionFields + ` } }`
	var changed subscriptionView
	e.field(e.gql(alice, update, map[string]any{"r": "Yearly", "k": "yearly-1"}), "updateSubscriptionRecurring", &changed)
	require.Equal(t, "Yearly", *changed.PendingRecurring)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", sub.ID)))
	e.field(e.gql(alice, update, map[string]any{"r": "Yearly", "k": "yearly-1"}), "updateSubscriptionRecurring", &s)
	require.Equal(t, changed, s, "not SAME_SUBSCRIPTION_RECURRING: the first answer")

	// A key is one call: other arguments or another mutation are refused.
	for name, r := range map[string]gqlResponse{
		"other arguments":            e.gql(alice, update, map[string]any{"r": "Monthly", "k": "yearly-1"}),
		"another mutation":           e.gql(alice, resume, map[string]any{"k": "cancel-1"}),
		"header on another mutation": e.gql(alice, `mutation { createCustomerPortal }`, nil, "Idempotency-Key", "checkout-1"),
	} {
		require.Equal(t, "IDEMPOTENCY_KEY_REUSED", r.code(), name)
		require.EqualValues(t, 422, r.Errors[0].Extensions["status"], name)
	}
	u := e.currentUser(alice, 8, 0)
	require.Equal(t, "Yearly", *u.Subscription.PendingRecurring, "the refused change did nothing")
	require.Zero(t, e.h.Billing.EventStats().DeadLettered)
}

// TestBillingConcurrentRetriesRunOnce: two requests with one key at the same
// time cancel once at Stripe and both get the same answer.
func TestBillingConcurrentRetriesRunOnce(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")
	sessID, _, _ := e.checkedOut(alice)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sessID)))
	e.eventually(func() bool { return e.currentUser(alice, 8, 0).Subscription != nil }, "subscribed")

	const cancel = `mutation { cancelSubscription { ` + subscriptionFields + ` } }`
	gate := fake.Hold(billingtest.OpSetCancel)
	defer gate.Release()
	var (
		wg  sync.WaitGroup
		out [2]gqlResponse
	)
	wg.Add(2)
	go func() { defer wg.Done(); out[0] = e.gql(alice, cancel, nil, "Idempotency-Key", "same") }()
	<-gate.Entered()
	go func() { defer wg.Done(); out[1] = e.gql(alice, cancel, nil, "Idempotency-Key", "same") }()
	require.Eventually(t, func() bool { return e.h.IdempotencyWaiters() > 0 }, 10*time.Second, 5*time.Millisecond,
		"the second request waits for the first")
	gate.Release()
	wg.Wait()
	var a, b subscriptionView
	e.field(out[0], "cancelSubscription", &a)
	e.field(out[1], "cancelSubscription", &b)
	require.Equal(t, a, b)
	require.NotNil(t, a.CanceledAt)
	n := 0
	for _, c := range fake.Calls() {
		if c.Op == billingtest.OpSetCancel {
			n++
		}
	}
	require.Equal(t, 1, n, "Stripe canceled once")
}
