package console_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// TestConsoleBilling walks the billing page of a gateway whose billing is
// configured: Stripe itself is unreachable (prices say so), and a Stripe
// event billing cannot apply lands in the dead letters, where the operator
// sees it and retries it. Subscriptions listed from a checkout need a
// Stripe that holds state; edge/billing_admin_test.go covers them with the
// fake Stripe.
func TestConsoleBilling(t *testing.T) {
	b := nodetest.StartBrowser(t)
	const secret = "whsec_console"
	sb := serveWithBilling(t, secret)
	ui := sb.BaseURL + "/ui/"

	// An invoice event without its invoice's id cannot be applied, ever:
	// it is dead-lettered at its first delivery.
	postDeadInvoiceEvent(t, sb, secret, "evt_console_dead")
	require.Eventually(t, func() bool {
		r := sb.Admin(t, http.MethodGet, "/api/billing/dead-letters", nil)
		return r.Status == http.StatusOK && r.JSON["total"] == float64(1)
	}, 20*time.Second, 20*time.Millisecond, "dead-lettered")

	mint := sb.Admin(t, http.MethodPost, "/api/console/sign-in-codes", map[string]any{})
	require.Equal(t, http.StatusCreated, mint.Status, "%s", mint.Body)
	b.GoTo(ui + "#/signin?code=" + mint.JSON["code"].(string))
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})

	b.GoTo(ui + "#/billing")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Dead-lettered webhook events (1)"})
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Subscriptions (0)"})
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Plans and prices"})
	text := b.Text()
	assert.Contains(t, text, "evt_console_dead")
	assert.Contains(t, text, "invoice.paid")
	assert.Contains(t, text, "has no object id", "the last error is shown")
	assert.Contains(t, text, "payment provider could not be reached", "prices say Stripe is unreachable")
	assert.NotContains(t, text, "not configured")
	b.Shot("billing-configured")

	// Retry: handed to the consumer again, it fails again and comes back.
	b.Click("button", "Retry event evt_console_dead")
	b.WaitText("handed to the consumer again")
	require.Eventually(t, func() bool {
		r := sb.Admin(t, http.MethodGet, "/api/billing/dead-letters", nil)
		return r.Status == http.StatusOK && r.JSON["total"] == float64(1)
	}, 20*time.Second, 20*time.Millisecond, "dead-lettered again")
	b.Do(map[string]any{"op": "reload"})
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Retry event evt_console_dead"})

	assert.Empty(t, b.Do(map[string]any{"op": "problems"}), "no script errors or CSP violations")
}

// serveWithBilling runs every role with billing configured for webhooks
// signed with secret, against a Stripe API that does not answer.
func serveWithBilling(t *testing.T, secret string) *nodetest.Instance {
	t.Helper()
	cfg := nodetest.Config(t.TempDir())
	cfg.StripeSecretKey = "sk_test_console"
	cfg.StripeWebhookSecret = secret
	cfg.StripeAPIBase = nodetest.ClosedURL(t)
	return nodetest.Start(t, cfg, node.AllRoles...)
}

// postDeadInvoiceEvent delivers a signed invoice.paid event without its
// invoice's id, which billing can never apply: it is dead-lettered at its
// first delivery. The webhook answers 200 (the event is stored).
func postDeadInvoiceEvent(t *testing.T, sb *nodetest.Instance, secret, id string) {
	t.Helper()
	payload := fmt.Appendf(nil, `{"id":%q,"object":"event","type":"invoice.paid","api_version":%q,"created":%d,"data":{"object":{"object":"invoice"}}}`,
		id, stripe.APIVersion, time.Now().Unix())
	sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: time.Now()}).Header
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+"/webhooks/stripe", bytes.NewReader(payload))
	require.NoError(t, err)
	req.Header.Set("Stripe-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
