package payments_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/internal/payments"
)

// syncBuffer is a bytes.Buffer safe for the logger's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// debugStripe is a Stripe client against base whose log, at debug level,
// goes to the returned buffer.
func debugStripe(t *testing.T, base string) (*payments.Stripe, *syncBuffer) {
	t.Helper()
	var logs syncBuffer
	s, err := payments.NewStripe(payments.StripeConfig{SecretKey: "sk_test_123", APIBase: base, MaxNetworkRetries: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	return s, &logs
}

// The Stripe client's log, at debug level too, tells which calls were made
// and how they ended, and holds no request or response body: no customer's
// email, no Checkout or portal session URL (which act as the customer on
// Stripe's hosted pages), no object Stripe answered.
func TestStripeLogHoldsNoBodies(t *testing.T) {
	s, logs := debugStripe(t, startStripeMock(t))
	ctx := context.Background()

	cus, err := s.CreateCustomer(ctx, "user-1", "user@example.com", "idem-customer")
	require.NoError(t, err)
	sess, err := s.CreateCheckoutSession(ctx, payments.CheckoutParams{
		CustomerID: cus.ID, UserID: "user-1", PriceID: "price_123",
		SuccessURL: "https://switchboard.test/billing/success", CancelURL: "https://switchboard.test/billing/cancel",
		CheckoutKey: "idem-checkout",
	}, "idem-checkout")
	require.NoError(t, err)
	require.NotEmpty(t, sess.URL)
	portal, err := s.CreatePortalSession(ctx, cus.ID, "https://switchboard.test/billing", "idem-portal")
	require.NoError(t, err)
	require.NotEmpty(t, portal)
	_, err = s.GetSubscription(ctx, "sub_123")
	require.NoError(t, err)

	out := logs.String()
	for _, secret := range []string{"user@example.com", sess.URL, portal, `"object"`, "Response:"} {
		assert.NotContains(t, out, secret)
	}
	assert.Contains(t, out, "POST", "the calls are told: %s", out)
	assert.Contains(t, out, "/v1/customers", "the calls are told: %s", out)
	assert.Contains(t, out, "/v1/subscriptions/sub_123", "the calls are told: %s", out)
}

// An error answer is logged with its status and request id, not its body:
// not the error's message or the objects it carries, not a body that is
// no Stripe error, not a sample of one that is not JSON; nor is such a body
// in the error the call returns, which its caller logs.
func TestStripeLogHoldsNoErrorBodies(t *testing.T) {
	const marker = "cs_live_SECRETSESSION"
	bodies := []struct {
		status int
		body   string
	}{
		{http.StatusBadRequest, `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such customer: ` + marker + `","payment_intent":{"id":"pi_1","client_secret":"x","receipt_email":"` + marker + `"}}}`},
		{http.StatusPaymentRequired, `{"error":{"type":"card_error","code":"card_declined","message":"declined for ` + marker + `"}}`},
		{http.StatusConflict, `{"url":"https://checkout.stripe.com/c/pay/` + marker + `"}`},
		{http.StatusBadRequest, `<html>` + marker + `</html>`},
		{http.StatusOK, `{"id":"cus_1","email":"` + marker + `"`},
	}
	for _, b := range bodies {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Request-Id", "req_TEST123")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(b.status)
			_, _ = w.Write([]byte(b.body))
		}))
		s, logs := debugStripe(t, srv.URL)
		_, err := s.GetCustomer(context.Background(), "cus_1")
		srv.Close()
		require.Error(t, err)
		out := logs.String()
		assert.NotContains(t, out, marker, "status %d", b.status)
		assert.NotContains(t, out, "client_secret", "status %d", b.status)
		assert.Contains(t, out, "/v1/customers/cus_1", "status %d: %s", b.status, out)
		if !strings.Contains(b.body, `"error"`) {
			// No Stripe error: what the caller gets, and logs, holds none
			// of the body either.
			assert.NotContains(t, err.Error(), marker, "status %d", b.status)
		}
		if b.status != http.StatusOK && strings.Contains(b.body, `"error"`) {
			assert.Contains(t, out, "req_TEST123", "status %d: %s", b.status, out)
			assert.Contains(t, out, "status="+strconv.Itoa(b.status), "status %d: %s", b.status, out)
		}
	}
}

// A call that gets no answer is logged with its error, the URL's query (a
// list's filters) left out.
func TestStripeLogTransportErrorWithoutQuery(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	s, logs := debugStripe(t, base)
	_, err := s.ListSubscriptions(context.Background(), "cus_QUERYMARK")
	require.Error(t, err)
	out := logs.String()
	assert.NotContains(t, out, "cus_QUERYMARK")
	assert.Contains(t, out, "connection refused", "%s", out)
	assert.Contains(t, out, "/v1/subscriptions", "%s", out)
}
