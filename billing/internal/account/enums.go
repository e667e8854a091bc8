package account

import (
	"strings"

	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

var planNames = map[billingv1.Plan]string{
	billingv1.Plan_PLAN_FREE:       "free",
	billingv1.Plan_PLAN_PRO:        "pro",
	billingv1.Plan_PLAN_TEAM:       "team",
	billingv1.Plan_PLAN_ENTERPRISE: "enterprise",
}

var recurringNames = map[billingv1.Recurring]string{
	billingv1.Recurring_RECURRING_MONTHLY: "monthly",
	billingv1.Recurring_RECURRING_YEARLY:  "yearly",
}

// Plans in the order prices are listed.
var Plans = []billingv1.Plan{billingv1.Plan_PLAN_FREE, billingv1.Plan_PLAN_PRO, billingv1.Plan_PLAN_TEAM, billingv1.Plan_PLAN_ENTERPRISE}

// LookupKey is the Stripe price lookup key of a plan and cycle:
// "<plan>_<recurring>" ("pro_monthly").
func LookupKey(plan billingv1.Plan, recurring billingv1.Recurring) string {
	return planNames[plan] + "_" + recurringNames[recurring]
}

// ParseLookupKey decodes a lookup key; ok is false for a key not of that
// shape.
func ParseLookupKey(key string) (plan billingv1.Plan, recurring billingv1.Recurring, ok bool) {
	p, r, found := strings.Cut(strings.ToLower(key), "_")
	if !found {
		return 0, 0, false
	}
	for k, v := range planNames {
		if v == p {
			plan = k
		}
	}
	for k, v := range recurringNames {
		if v == r {
			recurring = k
		}
	}
	return plan, recurring, plan != 0 && recurring != 0
}

var subscriptionStatuses = map[string]billingv1.SubscriptionStatus{
	"active":             billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_ACTIVE,
	"past_due":           billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAST_DUE,
	"unpaid":             billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_UNPAID,
	"canceled":           billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_CANCELED,
	"incomplete":         billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_INCOMPLETE,
	"paused":             billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAUSED,
	"incomplete_expired": billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_INCOMPLETE_EXPIRED,
	"trialing":           billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_TRIALING,
}

var invoiceStatuses = map[string]billingv1.InvoiceStatus{
	"draft":         billingv1.InvoiceStatus_INVOICE_STATUS_DRAFT,
	"open":          billingv1.InvoiceStatus_INVOICE_STATUS_OPEN,
	"void":          billingv1.InvoiceStatus_INVOICE_STATUS_VOID,
	"paid":          billingv1.InvoiceStatus_INVOICE_STATUS_PAID,
	"uncollectible": billingv1.InvoiceStatus_INVOICE_STATUS_UNCOLLECTIBLE,
}

// ended reports whether a subscription status is final.
func ended(s billingv1.SubscriptionStatus) bool {
	return s == billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_CANCELED ||
		s == billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_INCOMPLETE_EXPIRED
}

// entitled reports whether a status means the user has the plan now.
func entitled(s billingv1.SubscriptionStatus) bool {
	return s == billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_ACTIVE ||
		s == billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_TRIALING
}
