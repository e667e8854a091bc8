package edge

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

// streamMessages counts the events stored on SB_STRIPE.
func (e *billingEdge) streamMessages() uint64 {
	e.t.Helper()
	js, err := jetstream.New(e.h.NATS)
	require.NoError(e.t, err)
	s, err := js.Stream(context.Background(), "SB_STRIPE")
	require.NoError(e.t, err)
	info, err := s.Info(context.Background())
	require.NoError(e.t, err)
	return info.State.Msgs
}

// checkedOut takes alice through checkout at the fake and returns the ids
// Stripe's events would name.
func (e *billingEdge) checkedOut(token string) (sessionID, subID, invoiceID string) {
	e.t.Helper()
	var url string
	e.field(e.gql(token, `mutation { checkout(recurring: Monthly) }`, nil), "checkout", &url)
	sess, ok := e.h.Stripe.SessionByURL(url)
	require.True(e.t, ok)
	sub, inv, err := e.h.Stripe.CompleteCheckout(sess.ID, 0)
	require.NoError(e.t, err)
	return sess.ID, sub.ID, inv.ID
}

func TestBillingWebhookRefusals(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	payload := e.h.Stripe.Event("invoice.paid", "in_123")
	tests := []struct {
		name    string
		payload []byte
		sig     string
	}{
		{"no signature", payload, ""},
		{"garbage signature", payload, "t=1,v1=00"},
		{"signed with another secret", payload, stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: payload, Secret: "whsec_other",
		}).Header},
		{"body changed after signing", append([]byte(" "), payload...), billingtest.Sign(payload)},
		{"stale timestamp", payload, billingtest.SignAt(payload, time.Now().Add(-10*time.Minute))},
		{"other api version", []byte(strings.Replace(string(payload), "2023-10-16", "2024-06-20", 1)), ""},
		{"not an event", []byte(`{"id":"evt_1","object":"charge"}`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig := tt.sig
			if sig == "" && tt.name != "no signature" {
				sig = billingtest.Sign(tt.payload)
			}
			require.Equal(t, http.StatusBadRequest, e.deliverSigned(tt.payload, sig))
		})
	}
	require.Zero(t, e.streamMessages(), "nothing refused is stored")
	require.Equal(t, http.StatusOK, e.deliver(payload))
	require.EqualValues(t, 1, e.streamMessages())
}

// TestBillingWebhookBillingDown: with billing unreachable the edge answers
// 5xx, so Stripe delivers again later.
func TestBillingWebhookBillingDown(t *testing.T) {
	conn, err := grpc.NewClient("passthrough:///down",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return nil, errors.New("connection refused") }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	mux := http.NewServeMux()
	require.NoError(t, mountBilling(mux, conn, BillingConfig{JWTSecret: testJWTSecret}, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e := &billingEdge{t: t, srv: srv}
	payload := []byte(`{"id":"evt_1","object":"event","api_version":"2023-10-16","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`)
	require.Equal(t, http.StatusServiceUnavailable, e.deliver(payload))

	tok, err := MintDevToken(testJWTSecret, "u1", "", time.Hour)
	require.NoError(t, err)
	r := e.gql(tok, `{ currentUser { subscription { id } } }`, nil)
	require.Equal(t, "BILLING_UNAVAILABLE", r.code())
	require.EqualValues(t, 503, r.Errors[0].Extensions["status"])
}

// TestBillingEventWaitsForConsumer: events acknowledged while no consumer
// runs are applied once it returns.
func TestBillingEventWaitsForConsumer(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{NoConsumer: true})
	alice := e.token("alice", "a@example.com")
	sessID, subID, invID := e.checkedOut(alice)
	for _, p := range [][]byte{
		e.h.Stripe.Event("checkout.session.completed", sessID),
		e.h.Stripe.Event("customer.subscription.created", subID),
		e.h.Stripe.Event("invoice.paid", invID),
	} {
		require.Equal(t, http.StatusOK, e.deliver(p))
	}
	require.Nil(t, e.currentUser(alice, 8, 0).Subscription, "not applied while billing's consumer is down")

	e.h.StartConsumer()
	e.eventually(func() bool {
		u := e.currentUser(alice, 8, 0)
		return u.Subscription != nil && u.Subscription.Status == "Active" && u.InvoiceCount == 1
	}, "applied once the consumer is back")

	// Stopped again, then another event: also applied after the restart.
	e.h.StopConsumer()
	_, err := e.h.Stripe.SetSubscription(subID, billingtest.EndSubscription(time.Now()))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.deliver(e.h.Stripe.Event("customer.subscription.deleted", subID)))
	e.h.StartConsumer()
	e.eventually(func() bool { return e.currentUser(alice, 8, 0).Subscription.Status == "Canceled" }, "deleted applied after restart")
}

func TestBillingEventsTwiceAndOutOfOrder(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")
	sessID, subID, invID := e.checkedOut(alice)

	// The subscription's update and the invoice's payment arrive before the
	// checkout and creation events; each one is re-fetched, so the end state
	// is Stripe's.
	_, err := fake.SetCancelAtPeriodEnd(context.Background(), subID, true, "test-cancel")
	require.NoError(t, err)
	updated := fake.Event("customer.subscription.updated", subID)
	paid := fake.Event("invoice.paid", invID)
	require.Equal(t, http.StatusOK, e.deliver(updated))
	require.Equal(t, http.StatusOK, e.deliver(paid))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.created", invID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.created", subID)))
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sessID)))
	// The same deliveries again (Stripe retries).
	require.Equal(t, http.StatusOK, e.deliver(updated))
	require.Equal(t, http.StatusOK, e.deliver(paid))

	e.eventually(func() bool { return e.h.Billing.EventStats().Applied == 5 }, "five distinct events applied")
	u := e.currentUser(alice, 8, 0)
	require.Equal(t, "Active", u.Subscription.Status)
	require.NotNil(t, u.Subscription.CanceledAt, "the cancellation made at Stripe is shown")
	require.Equal(t, 1, u.InvoiceCount)
	require.Equal(t, "Paid", u.Invoices[0].Status)
	require.EqualValues(t, 5, e.streamMessages(), "duplicates dropped by event id on the bus")
}

func TestBillingFailingEventRetriedThenKept(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{MaxDeliver: 3})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")
	sessID, subID, invID := e.checkedOut(alice)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sessID)))
	e.eventually(func() bool { return e.currentUser(alice, 8, 0).Subscription != nil }, "subscription")

	// Stripe fails once: retried and applied.
	fake.FailNext(billingtest.OpGetInvoice, billingtest.Unavailable())
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("invoice.paid", invID)))
	e.eventually(func() bool { return e.currentUser(alice, 8, 0).InvoiceCount == 1 }, "applied after a retry")
	require.GreaterOrEqual(t, e.h.Billing.EventStats().Retried, int64(1))

	// Stripe keeps failing: the event is kept and counted.
	for range 3 {
		fake.FailNext(billingtest.OpGetSubscription, billingtest.Unavailable())
	}
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", subID)))
	e.eventually(func() bool { return e.h.Billing.EventStats().DeadLettered == 1 }, "dead-lettered")
	dead := e.h.DeadEvents()
	require.Len(t, dead, 1)
	require.Equal(t, "customer.subscription.updated", dead[0].Type)
	require.Contains(t, dead[0].Error, "stripe is unavailable")
}

func TestBillingGraphiQL(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	resp, err := http.Get(e.srv.URL + "/graphql")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
}
