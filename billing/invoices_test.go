package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/billing/internal/payments/paymentstest"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// TestDeletedInvoiceLeavesTheList: a draft invoice the operator deletes at
// Stripe leaves the user's invoices once its invoice.deleted arrives, and an
// event about it delivered after the deletion (Stripe retries, events out
// of order) is applied as the deletion it now is, not retried until it is
// dead-lettered.
func TestDeletedInvoiceLeavesTheList(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subscribe(t, h, c, alice)
	customers := h.Stripe.Customers()
	require.Len(t, customers, 1)

	count := func() int32 {
		got, err := c.CountInvoices(ctx, &billingv1.CountInvoicesRequest{User: alice})
		require.NoError(t, err)
		return got.GetCount()
	}
	draft, err := h.Stripe.CreateInvoice(customers[0].ID, "usd", 2500)
	require.NoError(t, err)
	ingest(t, h, c, "invoice.created", draft.ID)
	require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, 5*time.Millisecond, "the draft is listed")

	require.NoError(t, h.Stripe.DeleteInvoice(draft.ID))
	ingest(t, h, c, "invoice.updated", draft.ID)
	ingest(t, h, c, "invoice.deleted", draft.ID)
	require.Eventually(t, func() bool { return count() == 0 }, 10*time.Second, 5*time.Millisecond, "the deleted draft is no longer listed")
	require.Eventually(t, func() bool { return h.Billing.EventStats().Applied >= 4 }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, h.Billing.EventStats().DeadLettered, "an event about a deleted invoice is not a failure")
	require.Empty(t, h.DeadEvents())
}

// TestSecondCustomerLinkedToItsUser: a user's second Stripe customer (one
// made by a second checkout) is linked back to the user by its first event,
// so that its later events are applied without asking Stripe whose it is
// again.
func TestSecondCustomerLinkedToItsUser(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	c := edgeClient(h.Conn)
	ctx := context.Background()
	alice := &billingv1.User{Id: "alice", Email: "a@example.com"}
	subscribe(t, h, c, alice)
	require.Len(t, h.Stripe.Customers(), 1)
	second, err := h.Stripe.CreateCustomer(ctx, "alice", "a@example.com", "second-checkout")
	require.NoError(t, err)

	count := func() int32 {
		got, err := c.CountInvoices(ctx, &billingv1.CountInvoicesRequest{User: alice})
		require.NoError(t, err)
		return got.GetCount()
	}
	inv, err := h.Stripe.CreateInvoice(second.ID, "usd", 2500)
	require.NoError(t, err)
	ingest(t, h, c, "invoice.created", inv.ID)
	require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, 5*time.Millisecond, "the second customer's invoice is alice's")
	looked := stripeCalls(h, paymentstest.OpGetCustomer)

	applied := h.Billing.EventStats().Applied
	_, err = h.Stripe.UpdateInvoice(inv.ID, billingtest.FinalizeInvoice)
	require.NoError(t, err)
	ingest(t, h, c, "invoice.finalized", inv.ID)
	ingest(t, h, c, "invoice.updated", inv.ID)
	require.Eventually(t, func() bool { return h.Billing.EventStats().Applied >= applied+2 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, looked, stripeCalls(h, paymentstest.OpGetCustomer), "the second customer's later events ask Stripe for no customer")
}
