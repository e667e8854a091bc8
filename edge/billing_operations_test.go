package edge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
)

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
