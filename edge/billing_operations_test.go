package edge

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

// closedBillingEdge is a billing edge that does not listen on loopback
// only: introspection needs a signed-in user. Its error log is returned.
func closedBillingEdge(t *testing.T) (*billingEdge, *strings.Builder) {
	t.Helper()
	h := billingtest.Start(t, billingtest.Options{})
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
	mux := http.NewServeMux()
	require.NoError(t, mountBilling(mux, h.Conn, BillingConfig{JWTSecret: testJWTSecret}, log))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &billingEdge{t: t, h: h, srv: srv}, &logs
}

// An operation runs one mutation: aliases, fragments or several mutations
// in one request are refused as invalid before any of them runs, where 300
// aliased checkouts made some 1,800 Stripe calls from one request.
func TestBillingOneMutationPerOperation(t *testing.T) {
	e := newBillingEdge(t, billingtest.Options{})
	alice := e.token("alice", "a@example.com")
	var aliases strings.Builder
	aliases.WriteString("mutation {")
	for i := range 300 {
		fmt.Fprintf(&aliases, " m%d: checkout(recurring: Monthly)", i)
	}
	aliases.WriteString(" }")

	for name, op := range map[string]string{
		"aliases":            aliases.String(),
		"two mutations":      `mutation { cancelSubscription { id } resumeSubscription { id } }`,
		"a fragment":         `mutation { ...Both } fragment Both on Mutation { a: createCustomerPortal b: createCustomerPortal }`,
		"an inline fragment": `mutation { checkout(recurring: Monthly) ... on Mutation { again: checkout(recurring: Yearly) } }`,
	} {
		before := len(e.h.Stripe.Calls())
		r := e.gql(alice, op, nil)
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", r.code(), name)
		require.Contains(t, r.Errors[0].Message, "one mutation", name)
		require.Nil(t, r.Data["m0"], name)
		require.Empty(t, e.h.Stripe.Calls()[before:], "%s: a refused operation calls Stripe", name)
	}

	// One mutation, with __typename beside it or skipped copies, runs.
	r := e.gql(alice, `mutation($no: Boolean!) { __typename checkout(recurring: Monthly) again: checkout(recurring: Yearly) @include(if: $no) }`,
		map[string]any{"no": false})
	require.Empty(t, r.Errors)
	require.Contains(t, string(r.Data["checkout"]), "http")
}

// An anonymous introspection query is a client error (UNAUTHENTICATED:
// signing in opens it), refused before it runs and not logged as a server
// fault, where it was answered INTERNAL_SERVER_ERROR and logged at error.
func TestBillingAnonymousIntrospectionNeedsSignIn(t *testing.T) {
	e, logs := closedBillingEdge(t)
	for _, q := range []string{
		`{ __schema { queryType { name } } }`,
		`{ __type(name: "UserType") { fields { name } } }`,
		`{ prices { plan } ...Schema } fragment Schema on Query { __schema { types { name } } }`,
	} {
		r := e.gql("", q, nil)
		require.Equal(t, "UNAUTHENTICATED", r.code(), "%s: %q", q, r.Errors)
		require.EqualValues(t, 401, r.Errors[0].Extensions["status"], q)
		require.Contains(t, r.Errors[0].Message, "introspect", q)
		require.Nil(t, r.Data["__schema"], q)
		require.Nil(t, r.Data["prices"], "%s: the operation does not run", q)
	}
	require.Empty(t, logs.String(), "a client's introspection attempt is logged as an error")

	// __typename is no introspection; a signed-in user may introspect.
	require.Empty(t, e.gql("", `{ __typename prices { plan } }`, nil).Errors)
	r := e.gql(e.token("alice", ""), `{ __schema { queryType { name } } }`, nil)
	require.Empty(t, r.Errors)
	require.JSONEq(t, `{"queryType":{"name":"Query"}}`, string(r.Data["__schema"]))
}

// With introspection closed to a caller, validation errors do not spell the
// schema out in "Did you mean" suggestions; a caller who may introspect
// still gets them.
func TestBillingSuggestionsOnlyForWhoMayIntrospect(t *testing.T) {
	closed, _ := closedBillingEdge(t)
	open := newBillingEdge(t, billingtest.Options{})
	queries := map[string]string{
		`{ currentUsr { id } }`:                       `Cannot query field "currentUsr" on type "Query".`,
		`{ currentUser { subscriptio { id } } }`:      `Cannot query field "subscriptio" on type "UserType".`,
		`mutation { cancelSubscriptio { id } }`:       `Cannot query field "cancelSubscriptio" on type "Mutation".`,
		`mutation { checkout(recurring: Montly) }`:    `Value "Montly" does not exist in "SubscriptionRecurring!" enum.`,
		`{ currentUser { invoices(tak: 1) { id } } }`: `Unknown argument "tak" on field "UserType.invoices".`,
	}
	for q, bare := range queries {
		r := closed.gql("", q, nil)
		require.Equal(t, "GRAPHQL_VALIDATION_FAILED", r.code(), q)
		require.Equal(t, bare, r.Errors[0].Message, "%s: an anonymous caller learns the schema from suggestions", q)

		for name, r := range map[string]gqlResponse{"signed in": closed.gql(closed.token("alice", ""), q, nil), "loopback": open.gql("", q, nil)} {
			require.Equal(t, "GRAPHQL_VALIDATION_FAILED", r.code(), "%s %s", name, q)
			require.Contains(t, r.Errors[0].Message, bare[:len(bare)-1]+". Did you mean", "%s %s", name, q)
		}
	}
}
