package account

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/internal/payments"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

func TestLookupKeys(t *testing.T) {
	for _, plan := range Plans {
		for _, r := range []billingv1.Recurring{billingv1.Recurring_RECURRING_MONTHLY, billingv1.Recurring_RECURRING_YEARLY} {
			p, rr, ok := ParseLookupKey(LookupKey(plan, r))
			require.True(t, ok)
			require.Equal(t, plan, p)
			require.Equal(t, r, rr)
		}
	}
	require.Equal(t, "pro_monthly", LookupKey(billingv1.Plan_PLAN_PRO, billingv1.Recurring_RECURRING_MONTHLY))
	for _, bad := range []string{"", "pro", "pro_weekly", "gold_monthly", "pro_monthly_x"} {
		_, _, ok := ParseLookupKey(bad)
		require.False(t, ok, bad)
	}
}

func TestLastPaymentError(t *testing.T) {
	tests := []struct {
		name string
		inv  payments.Invoice
		want string
	}{
		{"none", payments.Invoice{}, ""},
		{"card error", payments.Invoice{AttemptCount: 1, PaymentError: &payments.Error{Type: "card_error", Message: "Your card was declined."}}, "Your card was declined."},
		{"card error without text", payments.Invoice{AttemptCount: 2, PaymentError: &payments.Error{Type: "card_error"}}, "Failed to pay"},
		{"other payment error", payments.Invoice{AttemptCount: 2, PaymentError: &payments.Error{Type: "api_error", Message: "secret detail"}}, "Internal Payment error"},
		{"finalization", payments.Invoice{FinalizationError: &payments.Error{Message: "Missing tax id"}}, "Missing tax id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, LastPaymentError(&tt.inv))
		})
	}
}

func TestIdempotencyKey(t *testing.T) {
	a := idempotencyKey("u1", "checkout", "k", "price_1")
	require.Equal(t, a, idempotencyKey("u1", "checkout", "k", "price_1"))
	require.NotEqual(t, a, idempotencyKey("u2", "checkout", "k", "price_1"), "per user")
	require.NotEqual(t, a, idempotencyKey("u1", "portal", "k", "price_1"), "per operation")
	require.NotEqual(t, a, idempotencyKey("u1", "checkout", "k", "price_2"), "per arguments")
	require.NotEqual(t, idempotencyKey("u1", "checkout", ""), idempotencyKey("u1", "checkout", ""), "fresh without a client key")
	require.LessOrEqual(t, len(a), 255)
}

// TestViewOfARecordStoredBeforeBilledRecurring: a record stored when
// recurring was the cycle billed now is shown with the chosen cycle in
// recurring and the billed one in billed_recurring; a current one as is.
func TestViewOfARecordStoredBeforeBilledRecurring(t *testing.T) {
	monthly, yearly := billingv1.Recurring_RECURRING_MONTHLY, billingv1.Recurring_RECURRING_YEARLY
	tests := []struct {
		name           string
		stored         *billingv1.Subscription
		chosen, billed billingv1.Recurring
	}{
		{"earlier, change scheduled", &billingv1.Subscription{Recurring: monthly, PendingRecurring: yearly}, yearly, monthly},
		{"earlier, no change", &billingv1.Subscription{Recurring: yearly}, yearly, yearly},
		{"current, change scheduled", &billingv1.Subscription{Recurring: yearly, BilledRecurring: monthly, PendingRecurring: yearly}, yearly, monthly},
		{"current, no change", &billingv1.Subscription{Recurring: monthly, BilledRecurring: monthly}, monthly, monthly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.stored.String()
			v := View(&billingv1.SubscriptionRecord{Subscription: tt.stored})
			require.Equal(t, tt.chosen, v.GetRecurring())
			require.Equal(t, tt.billed, v.GetBilledRecurring())
			require.Equal(t, before, tt.stored.String(), "the stored record is left as it is")
		})
	}
}
