package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

const testJWTSecret = "test-jwt-secret-0123456789"

// billingEdge is the edge's billing routes in front of a billing role with
// a fake Stripe.
type billingEdge struct {
	t   *testing.T
	h   *billingtest.Harness
	srv *httptest.Server
}

func newBillingEdge(t *testing.T, opts billingtest.Options) *billingEdge {
	t.Helper()
	h := billingtest.Start(t, opts)
	mux := http.NewServeMux()
	require.NoError(t, mountBilling(mux, h.Conn, BillingConfig{JWTSecret: testJWTSecret, Dev: true}, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &billingEdge{t: t, h: h, srv: srv}
}

func (e *billingEdge) token(user, email string) string {
	tok, err := MintDevToken(testJWTSecret, user, email, time.Hour)
	require.NoError(e.t, err)
	return tok
}

type gqlResponse struct {
	Data   map[string]json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Path       []any          `json:"path"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

// code is the first error's extensions.code ("" without errors).
func (r gqlResponse) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

func (e *billingEdge) gql(token, query string, vars map[string]any, headers ...string) gqlResponse {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(e.t, err)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/graphql", bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var out gqlResponse
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// field decodes data.<name> into v, failing on errors.
func (e *billingEdge) field(r gqlResponse, name string, v any) {
	e.t.Helper()
	require.Empty(e.t, r.Errors, "graphql errors")
	require.NoError(e.t, json.Unmarshal(r.Data[name], v))
}

// deliver posts a signed Stripe event to the webhook route.
func (e *billingEdge) deliver(payload []byte) int {
	e.t.Helper()
	return e.deliverSigned(payload, billingtest.Sign(payload))
}

func (e *billingEdge) deliverSigned(payload []byte, sig string) int {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/webhooks/stripe", bytes.NewReader(payload))
	require.NoError(e.t, err)
	req.Header.Set("Stripe-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

type subscriptionView struct {
	ID                 string  `json:"id"`
	Plan               string  `json:"plan"`
	Recurring          string  `json:"recurring"`
	Status             string  `json:"status"`
	Start              string  `json:"start"`
	End                string  `json:"end"`
	NextBillAt         *string `json:"nextBillAt"`
	CanceledAt         *string `json:"canceledAt"`
	PendingRecurring   *string `json:"pendingRecurring"`
	RecurringChangesAt *string `json:"recurringChangesAt"`
	BilledRecurring    string  `json:"billedRecurring"`
}

const subscriptionFields = `id plan recurring status start end nextBillAt canceledAt pendingRecurring recurringChangesAt billedRecurring`

type invoiceView struct {
	ID               string  `json:"id"`
	Plan             string  `json:"plan"`
	Recurring        string  `json:"recurring"`
	Currency         string  `json:"currency"`
	Amount           int     `json:"amount"`
	Status           string  `json:"status"`
	Reason           string  `json:"reason"`
	LastPaymentError *string `json:"lastPaymentError"`
	Link             *string `json:"link"`
	CreatedAt        string  `json:"createdAt"`
}

type userView struct {
	ID           string            `json:"id"`
	Email        *string           `json:"email"`
	Subscription *subscriptionView `json:"subscription"`
	Invoices     []invoiceView     `json:"invoices"`
	InvoiceCount int               `json:"invoiceCount"`
}

func (e *billingEdge) currentUser(token string, take, skip int) userView {
	e.t.Helper()
	r := e.gql(token, `query($take: Int, $skip: Int) { currentUser { id email subscription { `+subscriptionFields+` }
		invoices(take: $take, skip: $skip) { id plan recurring currency amount status reason lastPaymentError link createdAt } invoiceCount } }`,
		map[string]any{"take": take, "skip": skip})
	var u userView
	e.field(r, "currentUser", &u)
	return u
}

func (e *billingEdge) eventually(cond func() bool, what string) {
	e.t.Helper()
	require.Eventually(e.t, cond, 10*time.Second, 5*time.Millisecond, what)
}

// TestBillingJourney drives a user through checkout, cancel, resume, a
// change of cycle and back, and invoices paid and failed, all through
// GraphQL over HTTP with Stripe's webhooks arriving signed at the edge.
func TestBillingJourney(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	fake := e.h.Stripe
	alice := e.token("user-alice", "alice@example.com")

	// No subscription yet.
	u := e.currentUser(alice, 8, 0)
	require.Equal(t, "user-alice", u.ID)
	require.Nil(t, u.Subscription)
	require.Equal(t, 0, u.InvoiceCount)

	// Prices are public.
	var prices []struct {
		Plan         string `json:"plan"`
		Amount       *int   `json:"amount"`
		YearlyAmount *int   `json:"yearlyAmount"`
	}
	e.field(e.gql("", `{ prices { plan amount yearlyAmount currency type } }`, nil), "prices", &prices)
	require.Len(t, prices, 2)
	require.Equal(t, "Pro", prices[0].Plan)
	require.Equal(t, 800, *prices[0].Amount)
	require.Equal(t, 8100, *prices[0].YearlyAmount)

	// Checkout.
	var url string
	e.field(e.gql(alice, `mutation { checkout(recurring: Monthly) }`, nil), "checkout", &url)
	sess, ok := fake.SessionByURL(url)
	require.True(t, ok, "checkout URL %q is a session of the fake", url)
	require.Equal(t, "user-alice", sess.ClientReferenceID)
	customers := fake.Customers()
	require.Len(t, customers, 1)
	require.Equal(t, "user-alice", customers[0].UserID)
	require.Equal(t, "alice@example.com", customers[0].Email)

	// Paying: Stripe sends the checkout and subscription events.
	sub, firstInvoice, err := fake.CompleteCheckout(sess.ID, 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sess.ID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.created", sub.ID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.paid", firstInvoice.ID)))
	e.eventually(func() bool {
		u := e.currentUser(alice, 8, 0)
		return u.Subscription != nil && u.Subscription.Status == "Active" && u.InvoiceCount == 1
	}, "subscription active with its first invoice")
	u = e.currentUser(alice, 8, 0)
	require.Equal(t, sub.ID, u.Subscription.ID)
	require.Equal(t, "Pro", u.Subscription.Plan)
	require.Equal(t, "Monthly", u.Subscription.Recurring)
	require.Equal(t, sub.CurrentPeriodEnd.Format(time.RFC3339), u.Subscription.End)
	require.NotNil(t, u.Subscription.NextBillAt)
	require.Nil(t, u.Subscription.CanceledAt)
	require.Equal(t, "Paid", u.Invoices[0].Status)
	require.Equal(t, 800, u.Invoices[0].Amount)
	require.Equal(t, "usd", u.Invoices[0].Currency)
	require.Equal(t, "subscription_create", u.Invoices[0].Reason)
	require.NotNil(t, u.Invoices[0].Link)

	// A second checkout is refused.
	r := e.gql(alice, `mutation { checkout(recurring: Yearly) }`, nil)
	require.Equal(t, "SUBSCRIPTION_ALREADY_EXISTS", r.code())
	require.EqualValues(t, 409, r.Errors[0].Extensions["status"])

	// Portal.
	var portal string
	e.field(e.gql(alice, `mutation { createCustomerPortal }`, nil), "createCustomerPortal", &portal)
	require.Contains(t, portal, "https://billing.stripe.test/")

	// Cancel: still active until the period ends, no next bill.
	var s subscriptionView
	e.field(e.gql(alice, `mutation { cancelSubscription { `+subscriptionFields+` } }`, nil), "cancelSubscription", &s)
	require.Equal(t, "Active", s.Status)
	require.NotNil(t, s.CanceledAt)
	require.Nil(t, s.NextBillAt)
	require.Equal(t, "SUBSCRIPTION_HAS_BEEN_CANCELED", e.gql(alice, `mutation { cancelSubscription { id } }`, nil).code())
	require.Equal(t, "SUBSCRIPTION_HAS_BEEN_CANCELED", e.gql(alice, `mutation { updateSubscriptionRecurring(recurring: Yearly) { id } }`, nil).code())

	// Resume.
	e.field(e.gql(alice, `mutation { resumeSubscription { `+subscriptionFields+` } }`, nil), "resumeSubscription", &s)
	require.Equal(t, "Active", s.Status)
	require.Nil(t, s.CanceledAt)
	require.NotNil(t, s.NextBillAt)
	require.Equal(t, "SUBSCRIPTION_HAS_NOT_BEEN_CANCELED", e.gql(alice, `mutation { resumeSubscription { id } }`, nil).code())

	// Change to yearly: monthly until the period ends, then yearly.
	require.Equal(t, "SAME_SUBSCRIPTION_RECURRING", e.gql(alice, `mutation { updateSubscriptionRecurring(recurring: Monthly) { id } }`, nil).code())
	e.field(e.gql(alice, `mutation { updateSubscriptionRecurring(recurring: Yearly) { `+subscriptionFields+` } }`, nil), "updateSubscriptionRecurring", &s)
	require.Equal(t, "Yearly", s.Recurring, "the chosen cycle")
	require.Equal(t, "Monthly", s.BilledRecurring, "billed monthly until the period ends")
	require.NotNil(t, s.PendingRecurring)
	require.Equal(t, "Yearly", *s.PendingRecurring)
	require.Equal(t, s.End, *s.RecurringChangesAt)
	require.Equal(t, "SAME_SUBSCRIPTION_RECURRING", e.gql(alice, `mutation { updateSubscriptionRecurring(recurring: Yearly) { id } }`, nil).code())

	// Cancel with a scheduled change, then resume: the change is back.
	e.field(e.gql(alice, `mutation { cancelSubscription { `+subscriptionFields+` } }`, nil), "cancelSubscription", &s)
	require.Nil(t, s.PendingRecurring)
	require.NotNil(t, s.CanceledAt)
	e.field(e.gql(alice, `mutation { resumeSubscription { `+subscriptionFields+` } }`, nil), "resumeSubscription", &s)
	require.NotNil(t, s.PendingRecurring, "the scheduled change survives cancel and resume")
	require.Equal(t, "Yearly", *s.PendingRecurring)

	// And back to monthly: the schedule is released.
	e.field(e.gql(alice, `mutation { updateSubscriptionRecurring(recurring: Monthly) { `+subscriptionFields+` } }`, nil), "updateSubscriptionRecurring", &s)
	require.Equal(t, "Monthly", s.Recurring)
	require.Nil(t, s.PendingRecurring)
	require.Nil(t, s.RecurringChangesAt)
	st, _ := fake.Subscription(sub.ID)
	require.Empty(t, st.ScheduleID, "schedule released at Stripe")

	// Renewal: an invoice is created, finalized, fails, then is paid.
	inv, err := fake.Renew(sub.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.created", inv.ID)))
	_, err = fake.UpdateInvoice(inv.ID, billingtest.FinalizeInvoice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.finalized", inv.ID)))
	_, err = fake.UpdateInvoice(inv.ID, billingtest.FailPayment("card_error", "Your card was declined."))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.payment_failed", inv.ID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", sub.ID)))
	e.eventually(func() bool {
		u := e.currentUser(alice, 8, 0)
		return u.InvoiceCount == 2 && u.Invoices[0].LastPaymentError != nil && u.Subscription.Status == "PastDue"
	}, "failed renewal visible")
	u = e.currentUser(alice, 8, 0)
	require.Equal(t, inv.ID, u.Invoices[0].ID, "newest first")
	require.Equal(t, "Open", u.Invoices[0].Status)
	require.Equal(t, "Your card was declined.", *u.Invoices[0].LastPaymentError)
	require.Equal(t, "subscription_cycle", u.Invoices[0].Reason)

	_, err = fake.UpdateInvoice(inv.ID, billingtest.PayInvoice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.paid", inv.ID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", sub.ID)))
	e.eventually(func() bool {
		u := e.currentUser(alice, 8, 0)
		return u.Invoices[0].Status == "Paid" && u.Subscription.Status == "Active"
	}, "renewal paid")

	// More invoices, then paging.
	for range 3 {
		inv, err := fake.Renew(sub.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.created", inv.ID)))
	}
	e.eventually(func() bool { return e.currentUser(alice, 8, 0).InvoiceCount == 5 }, "five invoices")
	all := e.currentUser(alice, 8, 0).Invoices
	require.Len(t, all, 5)
	for i := 1; i < len(all); i++ {
		require.GreaterOrEqual(t, all[i-1].CreatedAt, all[i].CreatedAt, "newest first")
	}
	page := e.currentUser(alice, 2, 1)
	require.Equal(t, 5, page.InvoiceCount)
	require.Len(t, page.Invoices, 2)
	require.Equal(t, all[1].ID, page.Invoices[0].ID)
	require.Equal(t, all[2].ID, page.Invoices[1].ID)
	require.Empty(t, e.currentUser(alice, 8, 5).Invoices)

	// The period ends while canceled: Stripe deletes the subscription; it is
	// kept as canceled and a new checkout is allowed.
	e.field(e.gql(alice, `mutation { cancelSubscription { id } }`, nil), "cancelSubscription", &s)
	_, err = fake.Renew(sub.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.deleted", sub.ID)))
	e.eventually(func() bool {
		u := e.currentUser(alice, 8, 0)
		return u.Subscription != nil && u.Subscription.Status == "Canceled"
	}, "subscription kept as canceled")
	require.Equal(t, "SUBSCRIPTION_EXPIRED", e.gql(alice, `mutation { resumeSubscription { id } }`, nil).code())
	e.field(e.gql(alice, `mutation { checkout(recurring: Yearly) }`, nil), "checkout", &url)
	require.Len(t, fake.Customers(), 1, "one customer per user, reused")
	require.Zero(t, e.h.Billing.EventStats().DeadLettered)
}
