package account

import "net/http"

// Error is a failure a user can act on: a stable code (decisions.md), the
// HTTP status a front end shows, and a message fit for users.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is matches errors by code, so a copy with another message still matches.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// The errors of the billing flows.
var (
	ErrNotConfigured      = &Error{"BILLING_NOT_CONFIGURED", http.StatusServiceUnavailable, "billing is not configured on this server"}
	ErrUnauthenticated    = &Error{"UNAUTHENTICATED", http.StatusUnauthorized, "sign in first"}
	ErrSubscriptionExists = &Error{"SUBSCRIPTION_ALREADY_EXISTS", http.StatusConflict, "You already have a subscription"}
	// ErrSubscriptionUnsettled refuses a checkout while a subscription
	// awaits payment (past due, unpaid, incomplete, paused): the same code
	// as ErrSubscriptionExists, with a way out.
	ErrSubscriptionUnsettled = &Error{"SUBSCRIPTION_ALREADY_EXISTS", http.StatusConflict, "You already have a subscription awaiting payment: update your payment method in the billing portal instead of checking out again"}
	ErrNoSubscription        = &Error{"SUBSCRIPTION_NOT_EXISTS", http.StatusNotFound, "You do not have any subscription"}
	ErrCanceled              = &Error{"SUBSCRIPTION_HAS_BEEN_CANCELED", http.StatusBadRequest, "Your subscription has already been canceled"}
	ErrNotCanceled           = &Error{"SUBSCRIPTION_HAS_NOT_BEEN_CANCELED", http.StatusBadRequest, "Your subscription has not been canceled"}
	ErrExpired               = &Error{"SUBSCRIPTION_EXPIRED", http.StatusBadRequest, "Your subscription is expired, please checkout again."}
	ErrSameRecurring         = &Error{"SAME_SUBSCRIPTION_RECURRING", http.StatusBadRequest, "Your subscription is already billed on this cycle"}
	ErrNoCustomer            = &Error{"CUSTOMER_NOT_FOUND", http.StatusNotFound, "You have no billing account yet: check out first"}
	ErrPortalFailed          = &Error{"CUSTOMER_PORTAL_CREATE_FAILED", http.StatusBadGateway, "Failed to create customer portal"}
	ErrCheckoutFailed        = &Error{"FAILED_TO_CHECKOUT", http.StatusBadGateway, "Failed to create checkout session"}
	ErrPriceNotFound         = &Error{"PRICE_NOT_FOUND", http.StatusBadRequest, "This plan is not for sale"}
	ErrProviderUnavailable   = &Error{"PAYMENT_PROVIDER_UNAVAILABLE", http.StatusBadGateway, "The payment provider could not be reached, please try again"}
	// ErrProviderRefused: Stripe refused a change to the subscription (a
	// 4xx) even after billing re-read it; the refusal's detail is logged.
	ErrProviderRefused = &Error{"PAYMENT_PROVIDER_REFUSED", http.StatusConflict, "The payment provider refused this change to your subscription: reload it and try again, or make the change in the billing portal"}
	// ErrKeyReused: an idempotency key came back with other arguments or
	// on another mutation.
	ErrKeyReused = &Error{"IDEMPOTENCY_KEY_REUSED", http.StatusUnprocessableEntity, "This idempotency key was already used for another request: use a new key for a new request"}
	// ErrKeyInUse: the first call with this idempotency key is still
	// running.
	ErrKeyInUse = &Error{"IDEMPOTENCY_KEY_IN_USE", http.StatusConflict, "A request with this idempotency key is still in progress, please retry later"}
	// ErrCheckoutExpired answers a checkout retried with its idempotency
	// key once its page can no longer be paid (a newer checkout replaced
	// it, or it was left unpaid until Stripe expired it) and no open page
	// sells the same plan and cycle: a new checkout, with a new key, gets
	// a page.
	ErrCheckoutExpired = &Error{"CHECKOUT_EXPIRED", http.StatusGone, "This checkout page has expired or was replaced by a newer checkout: check out again to get a new page"}
)

// BadRequest is an invalid argument.
func BadRequest(msg string) *Error {
	return &Error{"BAD_REQUEST", http.StatusBadRequest, msg}
}
