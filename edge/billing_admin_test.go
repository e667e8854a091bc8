package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

const testAdminToken = "test-admin-token-0123456789"

// newBillingAdminEdge is newBillingEdge with the console's billing routes.
func newBillingAdminEdge(t *testing.T, opts billingtest.Options) *billingEdge {
	t.Helper()
	h := billingtest.Start(t, opts)
	mux := http.NewServeMux()
	require.NoError(t, mountBilling(mux, h.Conn, BillingConfig{JWTSecret: testJWTSecret}, nil))
	mountBillingAdmin(mux, h.Conn, testAdminToken, nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &billingEdge{t: t, h: h, srv: srv}
}

type apiAnswer struct {
	status int
	body   map[string]any
	raw    string
}

// code is the OpenAI-shaped error's code.
func (a apiAnswer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// param is the OpenAI-shaped error's param.
func (a apiAnswer) param() string {
	e, _ := a.body["error"].(map[string]any)
	p, _ := e["param"].(string)
	return p
}

func callAPI(t *testing.T, base, method, path, token string) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := apiAnswer{status: resp.StatusCode, raw: string(b)}
	require.NoError(t, json.Unmarshal(b, &a.body), string(b))
	return a
}

func (e *billingEdge) admin(method, path string) apiAnswer {
	e.t.Helper()
	return callAPI(e.t, e.srv.URL, method, path, testAdminToken)
}

// TestBillingAdminSubscriptions: a subscription made through checkout and
// its webhook is listed for the operator, paged, without payment details.
func TestBillingAdminSubscriptions(t *testing.T) {
	e := newBillingAdminEdge(t, billingtest.Options{})
	empty := e.admin(http.MethodGet, "/api/billing/subscriptions")
	require.Equal(t, http.StatusOK, empty.status, empty.raw)
	require.EqualValues(t, 0, empty.body["total"])
	require.Empty(t, empty.body["subscriptions"])

	subs := map[string]string{}
	for _, user := range []string{"alice", "bob"} {
		sessID, subID, _ := e.checkedOut(e.token(user, user+"@example.com"))
		require.Equal(t, http.StatusOK, e.deliver(e.h.Stripe.Event("checkout.session.completed", sessID)))
		subs[user] = subID
	}
	e.eventually(func() bool {
		a := e.admin(http.MethodGet, "/api/billing/subscriptions")
		return a.status == http.StatusOK && a.body["total"] == float64(2)
	}, "both subscriptions listed")

	all := e.admin(http.MethodGet, "/api/billing/subscriptions")
	rows := all.body["subscriptions"].([]any)
	require.Len(t, rows, 2)
	for _, r := range rows {
		row := r.(map[string]any)
		user := row["userId"].(string)
		require.Equal(t, subs[user], row["id"], user)
		assert.Equal(t, "active", row["status"])
		assert.Equal(t, "pro", row["plan"])
		assert.Equal(t, "monthly", row["recurring"])
		assert.Equal(t, "monthly", row["billedRecurring"])
		assert.Equal(t, false, row["cancelAtPeriodEnd"])
		st, ok := e.h.Stripe.Subscription(subs[user])
		require.True(t, ok)
		assert.Equal(t, st.CurrentPeriodEnd.UTC().Format(time.RFC3339), row["periodEnd"])
	}
	assert.NotContains(t, all.raw, "cus_", "no Stripe customer ids")
	assert.NotContains(t, all.raw, "@example.com", "no emails")

	first := e.admin(http.MethodGet, "/api/billing/subscriptions?take=1")
	second := e.admin(http.MethodGet, "/api/billing/subscriptions?take=1&skip=1")
	require.Len(t, first.body["subscriptions"], 1)
	require.Len(t, second.body["subscriptions"], 1)
	require.EqualValues(t, 2, second.body["total"])
	require.NotEqual(t, first.body["subscriptions"].([]any)[0].(map[string]any)["id"], second.body["subscriptions"].([]any)[0].(map[string]any)["id"])

	bad := e.admin(http.MethodGet, "/api/billing/subscriptions?take=-1")
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Equal(t, "invalid_value", bad.code())
	require.Equal(t, "take", bad.param())
	for _, path := range []string{"/api/billing/subscriptions?take=500", "/api/billing/dead-letters?take=101"} {
		tooMany := e.admin(http.MethodGet, path)
		require.Equal(t, http.StatusBadRequest, tooMany.status, path)
		require.Equal(t, "invalid_value", tooMany.code(), "the code of take=-1, in the admin routes' snake_case: %s", path)
		require.Equal(t, "take", tooMany.param(), "the field at fault is named, as for take=-1: %s", tooMany.raw)
	}
}

// TestBillingAdminDeadLetters: an event that keeps failing is listed with
// its attempts and error, and a retry applies it once Stripe is back.
func TestBillingAdminDeadLetters(t *testing.T) {
	e := newBillingAdminEdge(t, billingtest.Options{MaxDeliver: 2})
	fake := e.h.Stripe
	alice := e.token("alice", "a@example.com")
	sessID, subID, _ := e.checkedOut(alice)
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("checkout.session.completed", sessID)))
	// The state shows before the event is counted applied: wait for both.
	e.eventually(func() bool {
		return e.currentUser(alice, 8, 0).Subscription != nil && e.h.Billing.EventStats().Applied == 1
	}, "subscription")

	for range 2 {
		fake.FailNext(billingtest.OpGetSubscription, billingtest.Unavailable())
	}
	require.Equal(t, http.StatusOK, e.deliver(fake.Event("customer.subscription.updated", subID)))
	e.eventually(func() bool { return e.h.Billing.EventStats().DeadLettered == 1 }, "dead-lettered")

	list := e.admin(http.MethodGet, "/api/billing/dead-letters")
	require.Equal(t, http.StatusOK, list.status, list.raw)
	require.EqualValues(t, 1, list.body["total"])
	dead := list.body["deadLetters"].([]any)[0].(map[string]any)
	assert.Equal(t, "customer.subscription.updated", dead["type"])
	assert.EqualValues(t, 2, dead["attempts"])
	assert.Contains(t, dead["lastError"], "stripe is unavailable")
	assert.NotEmpty(t, dead["failedAt"])
	id := dead["id"].(string)
	assert.Equal(t, dead["eventId"], id)
	assert.NotContains(t, list.raw, "payload", "the event body is not shown")

	applied := e.h.Billing.EventStats().Applied
	retried := e.admin(http.MethodPost, "/api/billing/dead-letters/"+id+"/retry")
	require.Equal(t, http.StatusOK, retried.status, retried.raw)
	require.Equal(t, id, retried.body["eventId"])
	e.eventually(func() bool { return e.h.Billing.EventStats().Applied == applied+1 }, "applied on retry")
	require.Empty(t, e.admin(http.MethodGet, "/api/billing/dead-letters").body["deadLetters"])

	again := e.admin(http.MethodPost, "/api/billing/dead-letters/"+id+"/retry")
	require.Equal(t, http.StatusNotFound, again.status, again.raw)
	require.Equal(t, "dead_letter_not_found", again.code())
}

// TestBillingAdminRefused: without the admin token (or with a user's
// token) nothing is listed or retried.
func TestBillingAdminRefused(t *testing.T) {
	e := newBillingAdminEdge(t, billingtest.Options{})
	sessID, _, _ := e.checkedOut(e.token("alice", "a@example.com"))
	require.Equal(t, http.StatusOK, e.deliver(e.h.Stripe.Event("checkout.session.completed", sessID)))
	user := e.token("alice", "a@example.com")
	for _, tok := range []string{"", user, "wrong-admin-token", testAdminToken + "x"} {
		for _, route := range [][2]string{
			{http.MethodGet, "/api/billing/subscriptions"},
			{http.MethodGet, "/api/billing/dead-letters"},
			{http.MethodPost, "/api/billing/dead-letters/evt_1/retry"},
		} {
			a := callAPI(t, e.srv.URL, route[0], route[1], tok)
			require.Equal(t, http.StatusUnauthorized, a.status, route)
			require.Equal(t, "invalid_admin_token", a.code(), route)
			require.NotContains(t, a.raw, "alice")
		}
	}
}

// TestBillingAdminNotConfigured: the routes say plainly when billing is
// not part of the deployment, has no Stripe key, or cannot be reached.
func TestBillingAdminNotConfigured(t *testing.T) {
	serve := func(conn grpc.ClientConnInterface) string {
		mux := http.NewServeMux()
		mountBillingAdmin(mux, conn, testAdminToken, nil)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	down, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = down.Close() })
	cases := []struct {
		name   string
		base   string
		status int
		code   string
	}{
		{"no billing role", serve(nil), http.StatusServiceUnavailable, "billing_not_configured"},
		{"no Stripe key", serve(billingtest.Start(t, billingtest.Options{Unconfigured: true}).Conn), http.StatusServiceUnavailable, "billing_not_configured"},
		{"billing down", serve(down), http.StatusServiceUnavailable, "billing_unavailable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/api/billing/subscriptions", "/api/billing/dead-letters"} {
				a := callAPI(t, tc.base, http.MethodGet, path, testAdminToken)
				require.Equal(t, tc.status, a.status, a.raw)
				require.Equal(t, tc.code, a.code())
				msg := a.body["error"].(map[string]any)["message"].(string)
				require.True(t, strings.Contains(msg, "not configured") || strings.Contains(msg, "unavailable"), msg)
			}
		})
	}
}
