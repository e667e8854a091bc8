package payments_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/internal/payments"
)

// startStripeMock runs stripe-mock (github.com/stripe/stripe-mock v0.203.0)
// on loopback and returns its base URL. Without the binary the test is
// skipped locally and fails on CI.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("stripe-mock is not on PATH; install it with go install github.com/stripe/stripe-mock@v0.203.0")
		}
		t.Skip("stripe-mock is not on PATH (go install github.com/stripe/stripe-mock@v0.203.0)")
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not start")
		return ""
	}
}

// TestStripeRequestsAgainstStripeMock checks that the requests billing sends
// are accepted by Stripe's API schema (stripe-mock validates parameters).
func TestStripeRequestsAgainstStripeMock(t *testing.T) {
	base := startStripeMock(t)
	s, err := payments.NewStripe(payments.StripeConfig{SecretKey: "sk_test_123", APIBase: base})
	require.NoError(t, err)
	ctx := context.Background()

	cus, err := s.CreateCustomer(ctx, "user-1", "user@example.com", "idem-customer")
	require.NoError(t, err, "customer create")
	require.NotEmpty(t, cus.ID)

	prices, err := s.ListPrices(ctx, []string{"pro_monthly", "pro_yearly"})
	require.NoError(t, err, "price list")
	require.NotEmpty(t, prices)

	sess, err := s.CreateCheckoutSession(ctx, payments.CheckoutParams{
		CustomerID: cus.ID, UserID: "user-1", PriceID: "price_123",
		SuccessURL:  "https://switchboard.test/billing/success?session_id={CHECKOUT_SESSION_ID}",
		CancelURL:   "https://switchboard.test/billing/cancel",
		CheckoutKey: "idem-checkout",
	}, "idem-checkout")
	require.NoError(t, err, "checkout session create")
	require.NotEmpty(t, sess.ID)
	open, err := s.ListOpenCheckoutSessions(ctx, cus.ID)
	require.NoError(t, err, "checkout session list")
	require.NotEmpty(t, open)
	// stripe-mock's canned sessions carry no metadata: none is found, but
	// the list of every status is a request Stripe accepts.
	_, err = s.FindCheckoutSession(ctx, cus.ID, "idem-checkout")
	require.ErrorIs(t, err, payments.ErrNotFound, "checkout session list of every status")
	require.NoError(t, s.ExpireCheckoutSession(ctx, sess.ID, "idem-expire"), "checkout session expire")
	subs, err := s.ListSubscriptions(ctx, cus.ID)
	require.NoError(t, err, "subscription list")
	require.NotEmpty(t, subs)

	url, err := s.CreatePortalSession(ctx, cus.ID, "https://switchboard.test/billing", "idem-portal")
	require.NoError(t, err, "portal session create")
	require.NotEmpty(t, url)

	sub, err := s.SetCancelAtPeriodEnd(ctx, "sub_123", true, "idem-cancel")
	require.NoError(t, err, "subscription update")
	require.NotEmpty(t, sub.ID)
	_, err = s.GetSubscription(ctx, "sub_123")
	require.NoError(t, err, "subscription retrieve")

	sch, err := s.ScheduleChange(ctx, "sub_123", "", "price_456", "idem-schedule")
	require.NoError(t, err, "schedule create and update")
	require.NotEmpty(t, sch.ID)
	require.NoError(t, s.ReleaseSchedule(ctx, sch.ID, "idem-release"), "schedule release")
	_, err = s.GetSchedule(ctx, sch.ID)
	require.NoError(t, err, "schedule retrieve")

	_, err = s.GetInvoice(ctx, "in_123")
	require.NoError(t, err, "invoice retrieve")
	_, err = s.GetCheckoutSession(ctx, sess.ID)
	require.NoError(t, err, "checkout session retrieve")
	_, err = s.GetCustomer(ctx, cus.ID)
	require.NoError(t, err, "customer retrieve")
}
