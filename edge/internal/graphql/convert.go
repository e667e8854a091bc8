package graphql

import (
	"context"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/edge/internal/graphql/model"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// owner is the signed-in user, who must be the user being read: a user only
// ever reads their own billing data.
func owner(ctx context.Context, obj *model.UserType) (*billingv1.User, error) {
	user, err := signedIn(ctx)
	if err != nil {
		return nil, err
	}
	if obj == nil || obj.ID != user.GetId() {
		return nil, forbidden()
	}
	return user, nil
}

func clampInt32(v int) int32 {
	switch {
	case v > math.MaxInt32:
		return math.MaxInt32
	case v < math.MinInt32:
		return math.MinInt32
	}
	return int32(v)
}

func recurringToProto(r model.SubscriptionRecurring) billingv1.Recurring {
	switch r {
	case model.SubscriptionRecurringMonthly:
		return billingv1.Recurring_RECURRING_MONTHLY
	case model.SubscriptionRecurringYearly:
		return billingv1.Recurring_RECURRING_YEARLY
	}
	return billingv1.Recurring_RECURRING_UNSPECIFIED
}

func recurringFromProto(r billingv1.Recurring) model.SubscriptionRecurring {
	if r == billingv1.Recurring_RECURRING_YEARLY {
		return model.SubscriptionRecurringYearly
	}
	return model.SubscriptionRecurringMonthly
}

func planFromProto(p billingv1.Plan) model.SubscriptionPlan {
	switch p {
	case billingv1.Plan_PLAN_FREE:
		return model.SubscriptionPlanFree
	case billingv1.Plan_PLAN_TEAM:
		return model.SubscriptionPlanTeam
	case billingv1.Plan_PLAN_ENTERPRISE:
		return model.SubscriptionPlanEnterprise
	}
	return model.SubscriptionPlanPro
}

var subscriptionStatuses = map[billingv1.SubscriptionStatus]model.SubscriptionStatus{
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_ACTIVE:             model.SubscriptionStatusActive,
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAST_DUE:           model.SubscriptionStatusPastDue,
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_UNPAID:             model.SubscriptionStatusUnpaid,
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_CANCELED:           model.SubscriptionStatusCanceled,
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_INCOMPLETE:         model.SubscriptionStatusIncomplete,
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAUSED:             model.SubscriptionStatusPaused,
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_INCOMPLETE_EXPIRED: model.SubscriptionStatusIncompleteExpired,
	billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_TRIALING:           model.SubscriptionStatusTrialing,
}

var invoiceStatuses = map[billingv1.InvoiceStatus]model.InvoiceStatus{
	billingv1.InvoiceStatus_INVOICE_STATUS_DRAFT:         model.InvoiceStatusDraft,
	billingv1.InvoiceStatus_INVOICE_STATUS_OPEN:          model.InvoiceStatusOpen,
	billingv1.InvoiceStatus_INVOICE_STATUS_VOID:          model.InvoiceStatusVoid,
	billingv1.InvoiceStatus_INVOICE_STATUS_PAID:          model.InvoiceStatusPaid,
	billingv1.InvoiceStatus_INVOICE_STATUS_UNCOLLECTIBLE: model.InvoiceStatusUncollectible,
}

func timeOf(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func optTime(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func subscriptionFromProto(s *billingv1.Subscription) *model.UserSubscription {
	if s == nil {
		return nil
	}
	// A billing of an earlier release answers without billed_recurring,
	// its recurring the cycle billed now.
	chosen, billed := s.GetRecurring(), s.GetBilledRecurring()
	if billed == billingv1.Recurring_RECURRING_UNSPECIFIED {
		billed = chosen
		if p := s.GetPendingRecurring(); p != billingv1.Recurring_RECURRING_UNSPECIFIED {
			chosen = p
		}
	}
	out := &model.UserSubscription{
		ID:                 s.GetId(),
		Plan:               planFromProto(s.GetPlan()),
		Recurring:          recurringFromProto(chosen),
		BilledRecurring:    recurringFromProto(billed),
		Status:             subscriptionStatuses[s.GetStatus()],
		Start:              timeOf(s.GetStart()),
		End:                timeOf(s.GetEnd()),
		TrialStart:         optTime(s.GetTrialStart()),
		TrialEnd:           optTime(s.GetTrialEnd()),
		NextBillAt:         optTime(s.GetNextBillAt()),
		CanceledAt:         optTime(s.GetCanceledAt()),
		CreatedAt:          timeOf(s.GetCreatedAt()),
		UpdatedAt:          timeOf(s.GetUpdatedAt()),
		RecurringChangesAt: optTime(s.GetRecurringChangesAt()),
	}
	if out.Status == "" {
		out.Status = model.SubscriptionStatusIncomplete
	}
	if s.GetPendingRecurring() != billingv1.Recurring_RECURRING_UNSPECIFIED {
		r := recurringFromProto(s.GetPendingRecurring())
		out.PendingRecurring = &r
	}
	return out
}

func invoiceFromProto(inv *billingv1.Invoice) *model.UserInvoice {
	out := &model.UserInvoice{
		ID:               inv.GetId(),
		Plan:             planFromProto(inv.GetPlan()),
		Recurring:        recurringFromProto(inv.GetRecurring()),
		Currency:         inv.GetCurrency(),
		Amount:           int(inv.GetAmount()),
		Status:           invoiceStatuses[inv.GetStatus()],
		Reason:           inv.GetReason(),
		LastPaymentError: optString(inv.GetLastPaymentError()),
		Link:             optString(inv.GetLink()),
		CreatedAt:        timeOf(inv.GetCreatedAt()),
		UpdatedAt:        timeOf(inv.GetUpdatedAt()),
	}
	if out.Status == "" {
		out.Status = model.InvoiceStatusDraft
	}
	return out
}

func priceFromProto(p *billingv1.Price) *model.SubscriptionPrice {
	out := &model.SubscriptionPrice{Type: p.GetType(), Plan: planFromProto(p.GetPlan()), Currency: p.GetCurrency()}
	if p.GetHasAmount() {
		v := int(p.GetAmount())
		out.Amount = &v
	}
	if p.GetHasYearlyAmount() {
		v := int(p.GetYearlyAmount())
		out.YearlyAmount = &v
	}
	return out
}
