// Package payments is billing's narrow view of Stripe: the few calls the
// billing flows make, in billing's own types, so the flows can run against
// the real Stripe (NewStripe) or a stateful fake (paymentstest).
package payments

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Provider is everything billing asks of the payment provider.
type Provider interface {
	Customers
	Checkout
	Subscriptions
	Schedules
	Invoices
}

// Customers creates and reads customers and opens their billing portal.
type Customers interface {
	// CreateCustomer creates a customer whose metadata.user_id is userID.
	CreateCustomer(ctx context.Context, userID, email, idempotencyKey string) (*Customer, error)
	GetCustomer(ctx context.Context, id string) (*Customer, error)
	// CreatePortalSession returns the URL of a billing portal session.
	CreatePortalSession(ctx context.Context, customerID, returnURL, idempotencyKey string) (string, error)
}

// Checkout sells: prices and checkout sessions.
type Checkout interface {
	// ListPrices returns the active prices carrying one of lookupKeys.
	ListPrices(ctx context.Context, lookupKeys []string) ([]Price, error)
	CreateCheckoutSession(ctx context.Context, p CheckoutParams, idempotencyKey string) (*CheckoutSession, error)
	GetCheckoutSession(ctx context.Context, id string) (*CheckoutSession, error)
	// ListOpenCheckoutSessions returns the customer's checkout sessions that
	// can still be paid, newest first.
	ListOpenCheckoutSessions(ctx context.Context, customerID string) ([]CheckoutSession, error)
	// FindCheckoutSession returns the customer's newest checkout session
	// created with checkoutKey (CheckoutParams.CheckoutKey), whatever its
	// status; ErrNotFound when there is none.
	FindCheckoutSession(ctx context.Context, customerID, checkoutKey string) (*CheckoutSession, error)
	// ExpireCheckoutSession makes an open checkout session unpayable; it
	// fails for a session that is no longer open.
	ExpireCheckoutSession(ctx context.Context, id, idempotencyKey string) error
}

// Subscriptions reads and changes subscriptions.
type Subscriptions interface {
	GetSubscription(ctx context.Context, id string) (*Subscription, error)
	// ListSubscriptions returns every subscription of the customer, ended
	// ones included, newest first.
	ListSubscriptions(ctx context.Context, customerID string) ([]Subscription, error)
	// SetCancelAtPeriodEnd cancels (true) or resumes (false) a subscription at
	// the end of its current period.
	SetCancelAtPeriodEnd(ctx context.Context, id string, cancel bool, idempotencyKey string) (*Subscription, error)
}

// Schedules reads and changes the schedules of subscriptions.
type Schedules interface {
	GetSchedule(ctx context.Context, id string) (*Schedule, error)
	// ScheduleChange makes the subscription keep its current price until the
	// current period ends and then switch to newPriceID, without proration;
	// the current period keeps its trial and discounts. It creates a schedule from the subscription, or reuses scheduleID when
	// the subscription already has one.
	ScheduleChange(ctx context.Context, subscriptionID, scheduleID, newPriceID, idempotencyKey string) (*Schedule, error)
	// ReleaseSchedule detaches a schedule; the subscription keeps its current
	// price.
	ReleaseSchedule(ctx context.Context, scheduleID, idempotencyKey string) error
}

// Invoices reads invoices.
type Invoices interface {
	GetInvoice(ctx context.Context, id string) (*Invoice, error)
}

// ErrNotFound is returned for an object the provider does not know.
var ErrNotFound = errors.New("payments: no such object")

// APIError is a failure the provider answered with.
type APIError struct {
	// Status is the provider's HTTP status (0 for a network failure).
	Status  int
	Type    string
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("payments: %s (status %d, type %s, code %s)", e.Message, e.Status, e.Type, e.Code)
}

// Customer is a payment provider customer.
type Customer struct {
	ID    string
	Email string
	// UserID is metadata.user_id.
	UserID string
}

// Price is a recurring price.
type Price struct {
	ID        string
	LookupKey string
	Currency  string
	// UnitAmount is in minor units.
	UnitAmount int64
}

// CheckoutParams is a subscription-mode checkout of one price.
type CheckoutParams struct {
	CustomerID string
	// UserID becomes client_reference_id and subscription metadata.user_id.
	UserID     string
	PriceID    string
	SuccessURL string
	CancelURL  string
	// CheckoutKey names the checkout the session belongs to (its
	// metadata.checkout_key): a retried checkout sends the same key and
	// recognises its session among the open ones.
	CheckoutKey string
}

// CheckoutSession is a hosted checkout.
type CheckoutSession struct {
	ID                string
	URL               string
	CustomerID        string
	ClientReferenceID string
	// SubscriptionID is set once the checkout completed.
	SubscriptionID string
	// Status is open, complete or expired.
	Status string
	// Mode is subscription, payment or setup.
	Mode string
	// CheckoutKey is CheckoutParams.CheckoutKey ("" for a session billing
	// did not create).
	CheckoutKey string
	// PriceID is the price the session sells (CheckoutParams.PriceID; ""
	// for a session billing did not create, or created before it kept it).
	PriceID string
}

// Subscription is a provider subscription with its single price.
type Subscription struct {
	ID         string
	CustomerID string
	// Status is Stripe's status string: active, past_due, unpaid, canceled,
	// incomplete, incomplete_expired, trialing, paused.
	Status             string
	PriceID            string
	LookupKey          string
	CurrentPeriodStart time.Time
	CurrentPeriodEnd   time.Time
	// TrialStart, TrialEnd and CanceledAt are zero when unset.
	TrialStart        time.Time
	TrialEnd          time.Time
	CanceledAt        time.Time
	CancelAtPeriodEnd bool
	ScheduleID        string
	Created           time.Time
}

// Schedule is a subscription schedule.
type Schedule struct {
	ID             string
	SubscriptionID string
	// Status is not_started, active, completed, released or canceled.
	Status string
	Phases []Phase
}

// Phase is one phase of a schedule.
type Phase struct {
	PriceID   string
	LookupKey string
	Start     time.Time
	// End is zero for an open-ended phase.
	End time.Time
}

// Invoice is a provider invoice.
type Invoice struct {
	ID             string
	CustomerID     string
	SubscriptionID string
	// Status is draft, open, paid, void or uncollectible.
	Status        string
	Currency      string
	Total         int64
	BillingReason string
	HostedURL     string
	// LookupKey is the lookup key of the first line's price.
	LookupKey    string
	AttemptCount int64
	Created      time.Time
	// PaymentError is the last error of the invoice's payment intent.
	PaymentError *Error
	// FinalizationError is why the invoice could not be finalized.
	FinalizationError *Error
}

// Error is a provider error object attached to a payment or invoice.
type Error struct {
	// Type is card_error, api_error, invalid_request_error, ...
	Type    string
	Message string
}
