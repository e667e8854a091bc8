package edge

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

func TestBillingAuthentication(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	expired, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()}).
		SignedString([]byte(testJWTSecret))
	require.NoError(t, err)
	otherSecret, err := MintDevToken("another-secret-entirely", "alice", "", time.Hour)
	require.NoError(t, err)
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	noSubject, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"exp": time.Now().Add(time.Hour).Unix()}).
		SignedString([]byte(testJWTSecret))
	require.NoError(t, err)
	noExpiry, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice"}).SignedString([]byte(testJWTSecret))
	require.NoError(t, err)

	tokens := map[string]string{
		"no token": "", "garbage": "not-a-jwt", "expired": expired, "other secret": otherSecret,
		"alg none": none, "no subject": noSubject, "no expiry": noExpiry,
	}
	operations := []string{
		`{ currentUser { id } }`,
		`mutation { checkout(recurring: Monthly) }`,
		`mutation { createCustomerPortal }`,
		`mutation { cancelSubscription { id } }`,
		`mutation { resumeSubscription { id } }`,
		`mutation { updateSubscriptionRecurring(recurring: Yearly) { id } }`,
	}
	for name, tok := range tokens {
		for _, op := range operations {
			r := e.gql(tok, op, nil)
			require.Equal(t, "UNAUTHENTICATED", r.code(), "%s: %s", name, op)
			require.EqualValues(t, 401, r.Errors[0].Extensions["status"])
		}
	}
	// Prices need no user.
	require.Empty(t, e.gql("", `{ prices { plan } }`, nil).Errors)
}

func TestBillingGuards(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")

	for _, op := range []string{
		`mutation { cancelSubscription { id } }`,
		`mutation { resumeSubscription { id } }`,
		`mutation { updateSubscriptionRecurring(recurring: Yearly) { id } }`,
	} {
		r := e.gql(alice, op, nil)
		require.Equal(t, "SUBSCRIPTION_NOT_EXISTS", r.code(), op)
		require.EqualValues(t, 404, r.Errors[0].Extensions["status"])
	}
	require.Equal(t, "CUSTOMER_NOT_FOUND", e.gql(alice, `mutation { createCustomerPortal }`, nil).code())
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", e.gql(alice, `mutation { checkout(recurring: Weekly) }`, nil).code())

	// Stripe refuses or is down.
	fake.FailNext(billingtest.OpCreateCheckout, &badRequestErr)
	r := e.gql(alice, `mutation { checkout(recurring: Monthly) }`, nil)
	require.Equal(t, "FAILED_TO_CHECKOUT", r.code())
	require.EqualValues(t, 502, r.Errors[0].Extensions["status"])
	fake.FailNext(billingtest.OpCreateCheckout, billingtest.Unavailable())
	require.Equal(t, "PAYMENT_PROVIDER_UNAVAILABLE", e.gql(alice, `mutation { checkout(recurring: Monthly) }`, nil).code())

	// Subscribed; then the period ends without Stripe's deletion arriving
	// yet: resume is refused as expired.
	sessID, subID, _ := e.checkedOut(alice)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sessID)))
	e.eventually(func() bool { return e.currentUser(alice, 8, 0).Subscription != nil }, "subscribed")
	fake.FailNext(billingtest.OpCreatePortal, &badRequestErr)
	require.Equal(t, "CUSTOMER_PORTAL_CREATE_FAILED", e.gql(alice, `mutation { createCustomerPortal }`, nil).code())
	require.Empty(t, e.gql(alice, `mutation { cancelSubscription { id } }`, nil).Errors)
	_, err := fake.SetSubscription(subID, billingtest.MovePeriod(-40*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", subID)))
	e.eventually(func() bool {
		return e.gql(alice, `mutation { resumeSubscription { id } }`, nil).code() == "SUBSCRIPTION_EXPIRED"
	}, "expired subscription cannot be resumed")
}

var badRequestErr = billingtest.BadRequestError

func TestBillingUsersSeeOnlyTheirOwnData(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")
	bob := e.token("bob", "a@example.com") // same email: never matched by email
	sessID, _, invID := e.checkedOut(alice)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sessID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.paid", invID)))
	e.eventually(func() bool { return e.currentUser(alice, 8, 0).InvoiceCount == 1 }, "alice's invoice")

	u := e.currentUser(bob, 8, 0)
	require.Equal(t, "bob", u.ID)
	require.Nil(t, u.Subscription)
	require.Empty(t, u.Invoices)
	require.Zero(t, u.InvoiceCount)
	require.Equal(t, "CUSTOMER_NOT_FOUND", e.gql(bob, `mutation { createCustomerPortal }`, nil).code())
	require.Equal(t, "SUBSCRIPTION_NOT_EXISTS", e.gql(bob, `mutation { cancelSubscription { id } }`, nil).code())

	// Bob's checkout gets a customer of his own.
	var url string
	e.field(e.gql(bob, `mutation { checkout(recurring: Monthly) }`, nil), "checkout", &url)
	require.Len(t, fake.Customers(), 2)
}

func TestBillingIdempotencyKeys(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	alice := e.token("alice", "a@example.com")
	checkout := func(query string, headers ...string) string {
		var url string
		e.field(e.gql(alice, query, nil, headers...), "checkout", &url)
		return url
	}
	a := checkout(`mutation { checkout(recurring: Monthly, idempotencyKey: "k1") }`)
	require.Equal(t, a, checkout(`mutation { checkout(recurring: Monthly, idempotencyKey: "k1") }`), "same key, same session")
	require.Equal(t, a, checkout(`mutation { checkout(recurring: Monthly) }`, "Idempotency-Key", "k1"), "header works too")
	require.NotEqual(t, a, checkout(`mutation { checkout(recurring: Monthly, idempotencyKey: "k2") }`))
	r := e.gql(alice, `mutation { checkout(recurring: Yearly, idempotencyKey: "k1") }`, nil)
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", r.code(), "other arguments with a used key are refused")
	require.EqualValues(t, 422, r.Errors[0].Extensions["status"])
	for _, c := range e.h.Stripe.Calls() {
		if c.Op == billingtest.OpCreateCheckout || c.Op == billingtest.OpCreateCustomer {
			require.NotEmpty(t, c.IdempotencyKey, "every write carries an idempotency key")
			require.NotContains(t, c.IdempotencyKey, "k1", "keys are derived, not passed through")
		}
	}
}

func TestBillingNotConfigured(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{Unconfigured: true})
	alice := e.token("alice", "")
	for _, op := range []string{
		`{ prices { plan } }`,
		`{ currentUser { subscription { id } } }`,
		`{ currentUser { invoices { id } } }`,
		`{ currentUser { invoiceCount } }`,
		`mutation { checkout(recurring: Monthly) }`,
		`mutation { createCustomerPortal }`,
		`mutation { cancelSubscription { id } }`,
		`mutation { resumeSubscription { id } }`,
		`mutation { updateSubscriptionRecurring(recurring: Yearly) { id } }`,
	} {
		r := e.gql(alice, op, nil)
		require.Equal(t, "BILLING_NOT_CONFIGURED", r.code(), op)
		require.EqualValues(t, 503, r.Errors[0].Extensions["status"])
	}
	require.Equal(t, http.StatusServiceUnavailable, e.deliver([]byte(`{"id":"evt_1","object":"event"}`)))
}
