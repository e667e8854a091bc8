package payments_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// stripeCall is one request billing sent, its form decoded.
type stripeCall struct {
	Method, Path string
	Form         url.Values
}

// recordStripe puts a proxy in front of stripe-mock that keeps the requests
// billing sends and passes each answer through rewrite (stripe-mock is
// stateless: its canned objects carry only what a test writes into them).
func recordStripe(t *testing.T, base string, rewrite func(path string, obj map[string]any)) (string, func() []stripeCall) {
	t.Helper()
	target, err := url.Parse(base)
	require.NoError(t, err)
	var mu sync.Mutex
	var calls []stripeCall
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var obj map[string]any
		if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &obj) == nil {
			rewrite(resp.Request.Method+" "+resp.Request.URL.Path, obj)
			if body, err = json.Marshal(obj); err != nil {
				return err
			}
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		mu.Lock()
		calls = append(calls, stripeCall{Method: r.Method, Path: r.URL.Path, Form: form})
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []stripeCall {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

// TestScheduleChangeKeepsTrialAndDiscounts: a change of cycle rewrites the
// schedule's phases, and Stripe keeps nothing of a phase that is not sent
// again: the current phase's trial end and discounts (or legacy coupon) go
// with it, so a trialing user keeps the trial and a discounted one the
// discount. The new cycle's phase reuses the discounts the subscription
// holds (a phase naming none would only inherit the customer's, so a
// promotion code redeemed at checkout would end with the old cycle); a
// coupon not yet a discount is not redeemed again there (a coupon that
// lasts some months would start over).
func TestScheduleChangeKeepsTrialAndDiscounts(t *testing.T) {
	base := startStripeMock(t)
	const start, end, trialEnd = 1722558872, 1754008472, 1723768472
	for _, tt := range []struct {
		name       string
		scheduleID string
		phase      map[string]any
		want       url.Values
		wantNext   url.Values
	}{{
		name:     "new schedule, trialing with a discount",
		phase:    map[string]any{"trial_end": trialEnd, "discounts": []any{map[string]any{"coupon": nil, "discount": "di_123", "promotion_code": nil}}, "coupon": "co_123"},
		want:     url.Values{"phases[0][trial_end]": {strconv.Itoa(trialEnd)}, "phases[0][discounts][0][discount]": {"di_123"}},
		wantNext: url.Values{"phases[1][discounts][0][discount]": {"di_123"}},
	}, {
		name: "two discounts and a promotion code not yet redeemed",
		phase: map[string]any{"discounts": []any{
			map[string]any{"coupon": nil, "discount": "di_123", "promotion_code": nil},
			map[string]any{"coupon": nil, "discount": nil, "promotion_code": "promo_123"},
			map[string]any{"coupon": "co_456", "discount": "di_456", "promotion_code": nil},
		}},
		want: url.Values{"phases[0][discounts][0][discount]": {"di_123"}, "phases[0][discounts][1][promotion_code]": {"promo_123"},
			"phases[0][discounts][2][discount]": {"di_456"}},
		wantNext: url.Values{"phases[1][discounts][0][discount]": {"di_123"}, "phases[1][discounts][1][discount]": {"di_456"}},
	}, {
		name:       "existing schedule, a coupon only",
		scheduleID: "sub_sched_123",
		phase:      map[string]any{"coupon": "co_123", "discounts": []any{}},
		want:       url.Values{"phases[0][discounts][0][coupon]": {"co_123"}},
	}, {
		name:  "neither",
		phase: map[string]any{},
		want:  url.Values{},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			proxied, calls := recordStripe(t, base, func(path string, obj map[string]any) {
				if !strings.HasPrefix(path, "GET /v1/subscription_schedules") && path != "POST /v1/subscription_schedules" {
					return
				}
				phase := map[string]any{
					"start_date": start, "end_date": end, "trial_end": nil, "coupon": nil, "discounts": []any{},
					"items": []any{map[string]any{"price": "price_123", "quantity": 1}},
				}
				maps.Copy(phase, tt.phase)
				obj["phases"] = []any{phase}
				obj["current_phase"] = map[string]any{"start_date": start, "end_date": end}
			})
			s, err := payments.NewStripe(payments.StripeConfig{SecretKey: "sk_test_123", APIBase: proxied})
			require.NoError(t, err)
			_, err = s.ScheduleChange(context.Background(), "sub_123", tt.scheduleID, "price_456", "idem-schedule")
			require.NoError(t, err, "stripe-mock accepts the phases")

			var update *stripeCall
			for _, c := range calls() {
				if c.Method == http.MethodPost && strings.HasPrefix(c.Path, "/v1/subscription_schedules/") {
					update = &c
				}
			}
			require.NotNil(t, update, "the schedule's phases are updated")
			got := url.Values{}
			for k, v := range update.Form {
				if strings.HasPrefix(k, "phases[0][trial") || strings.HasPrefix(k, "phases[0][discounts]") || k == "phases[0][coupon]" {
					got[k] = v
				}
			}
			require.Equal(t, tt.want, got, "the current phase as sent: %v", update.Form)
			next := url.Values{}
			for k, v := range update.Form {
				if strings.HasPrefix(k, "phases[1][discounts]") || k == "phases[1][coupon]" {
					next[k] = v
				}
			}
			if tt.wantNext == nil {
				tt.wantNext = url.Values{}
			}
			require.Equal(t, tt.wantNext, next, "the new cycle's phase as sent: %v", update.Form)
			require.Equal(t, []string{"price_456"}, update.Form["phases[1][items][0][price]"])
			require.Empty(t, update.Form["phases[1][trial_end]"], "the new cycle's phase starts after the trial")
		})
	}
}
