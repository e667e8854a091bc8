// Package account is a user's billing account: their Stripe customer,
// subscriptions and invoices. It holds the flows (checkout, portal, cancel,
// resume, change of cycle) with their guards, and the sync that copies
// Stripe's objects into billing's buckets.
package account

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/billing/internal/payments"
	"github.com/switchboardhq/switchboard/billing/internal/store"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Config configures the flows.
type Config struct {
	// PublicURL is the base of checkout success/cancel and portal return
	// links.
	PublicURL string
	// PriceCacheTTL is how long the price list is kept; 0 means 5 minutes.
	PriceCacheTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// User is the signed-in user a call acts for.
type User struct {
	ID    string
	Email string
}

// Service runs the flows against a payment provider and the store.
type Service struct {
	pay payments.Provider
	st  *store.Store
	cfg Config
	log *slog.Logger

	// priceLock holds a token while the price list is read or loaded: a
	// channel rather than a mutex, so that a caller waiting behind a slow
	// load gives up when its context ends.
	priceLock    chan struct{}
	prices       []payments.Price
	pricesExpire time.Time
}

// New returns a Service.
func New(pay payments.Provider, st *store.Store, cfg Config, log *slog.Logger) *Service {
	if cfg.PriceCacheTTL <= 0 {
		cfg.PriceCacheTTL = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.PublicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	return &Service{pay: pay, st: st, cfg: cfg, log: log, priceLock: make(chan struct{}, 1)}
}

// idempotencyKey derives the Stripe idempotency key of one write. With a
// client key the same call gives the same key, so a retried mutation
// returns Stripe's first answer; without one each call gets a fresh key
// (stripe-go reuses it for its own retries).
func idempotencyKey(userID, op, clientKey string, parts ...string) string {
	if clientKey == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return "sb-" + op + "-" + hex.EncodeToString(b[:])
	}
	h := sha256.New()
	for _, p := range append([]string{userID, op, clientKey}, parts...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "sb-" + op + "-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// providerError turns a payment provider failure into a user-facing error,
// logging the detail: PAYMENT_PROVIDER_UNAVAILABLE when Stripe could not
// answer, else fallback, else PAYMENT_PROVIDER_REFUSED for Stripe's refusal
// (a 4xx other than 401 and 403, which say billing's key is wrong: those
// stay internal errors, masked).
func (s *Service) providerError(op string, err error, fallback *Error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	s.log.Warn("stripe call failed", "op", op, "err", err)
	var api *payments.APIError
	if errors.As(err, &api) && (api.Status == 0 || api.Status >= 500 || api.Status == 429) {
		return ErrProviderUnavailable
	}
	if fallback != nil {
		return fallback
	}
	if (api != nil && api.Status != http.StatusUnauthorized && api.Status != http.StatusForbidden) || errors.Is(err, payments.ErrNotFound) {
		return ErrProviderRefused
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Current is the user's current subscription: the newest one that has not
// ended, else the newest one; nil when the user never subscribed.
func (s *Service) Current(userID string) *billingv1.SubscriptionRecord {
	all := s.st.Subscriptions(userID)
	for _, r := range all {
		if !ended(r.GetSubscription().GetStatus()) {
			return r
		}
	}
	if len(all) > 0 {
		return all[0]
	}
	return nil
}

// AllSubscriptions pages through every user's subscriptions, newest first
// (for operators).
func (s *Service) AllSubscriptions(take, skip int) ([]*billingv1.SubscriptionRecord, int) {
	return s.st.SubscriptionPage(take, skip)
}

// Invoices pages through a user's invoices, newest first.
func (s *Service) Invoices(userID string, take, skip int) ([]*billingv1.Invoice, int) {
	recs, total := s.st.Invoices(userID, take, skip)
	out := make([]*billingv1.Invoice, len(recs))
	for i, r := range recs {
		out[i] = r.GetInvoice()
	}
	return out, total
}

// customer returns the user's Stripe customer id, creating the customer on
// first use (one per user id, never matched by email).
func (s *Service) customer(ctx context.Context, u User) (string, error) {
	if rec, ok := s.st.CustomerByUser(u.ID); ok {
		return rec.GetCustomerId(), nil
	}
	// The key is fixed per user, so concurrent first checkouts create one
	// customer at Stripe.
	c, err := s.pay.CreateCustomer(ctx, u.ID, u.Email, idempotencyKey(u.ID, "customer", "user", u.ID))
	if err != nil {
		return "", s.providerError("create customer", err, ErrCheckoutFailed)
	}
	rec, err := s.st.LinkCustomer(ctx, &billingv1.CustomerRecord{UserId: u.ID, CustomerId: c.ID, Email: u.Email})
	if err != nil {
		return "", fmt.Errorf("link customer: %w", err)
	}
	return rec.GetCustomerId(), nil
}

// allPrices lists the prices of every plan and cycle, cached briefly. One
// caller at a time loads the list; the others wait for it, until their
// context ends, which answers its error and leaves the load running.
func (s *Service) allPrices(ctx context.Context) ([]payments.Price, error) {
	select {
	case s.priceLock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.priceLock }()
	if s.prices != nil && s.cfg.Now().Before(s.pricesExpire) {
		return s.prices, nil
	}
	var keys []string
	for _, p := range Plans {
		for r := range recurringNames {
			keys = append(keys, LookupKey(p, r))
		}
	}
	prices, err := s.pay.ListPrices(ctx, keys)
	if err != nil {
		return nil, s.providerError("list prices", err, nil)
	}
	if prices == nil {
		prices = []payments.Price{}
	}
	s.prices = prices
	s.pricesExpire = s.cfg.Now().Add(s.cfg.PriceCacheTTL)
	return prices, nil
}

func (s *Service) price(ctx context.Context, plan billingv1.Plan, recurring billingv1.Recurring) (payments.Price, error) {
	prices, err := s.allPrices(ctx)
	if err != nil {
		return payments.Price{}, err
	}
	key := LookupKey(plan, recurring)
	for _, p := range prices {
		if p.LookupKey == key {
			return p, nil
		}
	}
	return payments.Price{}, ErrPriceNotFound
}

// Prices are the public prices, one entry per plan that has any.
func (s *Service) Prices(ctx context.Context) ([]*billingv1.Price, error) {
	prices, err := s.allPrices(ctx)
	if err != nil {
		return nil, err
	}
	var out []*billingv1.Price
	for _, plan := range Plans {
		var entry *billingv1.Price
		for _, p := range prices {
			pl, r, ok := ParseLookupKey(p.LookupKey)
			if !ok || pl != plan {
				continue
			}
			if entry == nil {
				entry = &billingv1.Price{Type: "fixed", Plan: plan, Currency: p.Currency}
			}
			if r == billingv1.Recurring_RECURRING_MONTHLY {
				entry.Amount, entry.HasAmount = p.UnitAmount, true
			} else {
				entry.YearlyAmount, entry.HasYearlyAmount = p.UnitAmount, true
			}
		}
		if entry != nil {
			out = append(out, entry)
		}
	}
	return out, nil
}

// Checkout creates a checkout session and returns its URL.
//
// A user holds at most one subscription, and at most one checkout session
// of theirs can be paid at a time. Billing's copy of the subscriptions
// refuses first; as Stripe's webhooks update that copy only later, Stripe
// is then asked too: the sessions of the user's other checkouts are
// expired, and only then are the subscriptions at Stripe read, so that one
// paid meanwhile is seen. A checkout retried with its client key sends the
// same Stripe idempotency key, which is also its session's checkout key:
// it gets its session back and never expires it. When Stripe cannot be
// asked, the checkout fails (PAYMENT_PROVIDER_UNAVAILABLE or
// FAILED_TO_CHECKOUT) rather than risk a second payable session.
func (s *Service) Checkout(ctx context.Context, u User, plan billingv1.Plan, recurring billingv1.Recurring, clientKey string) (string, error) {
	if recurring == billingv1.Recurring_RECURRING_UNSPECIFIED {
		return "", BadRequest("recurring is required")
	}
	// Current is the newest subscription that has not ended, if any.
	if cur := s.Current(u.ID); cur != nil {
		if err := refusal(cur.GetSubscription().GetStatus()); err != nil {
			return "", err
		}
	}
	price, key, err := s.checkoutPrice(ctx, u, plan, recurring, clientKey)
	if err != nil {
		return "", err
	}
	customerID, err := s.customer(ctx, u)
	if err != nil {
		return "", err
	}
	if err := s.expireOtherCheckouts(ctx, u.ID, customerID, key, clientKey, ""); err != nil {
		return "", err
	}
	if err := s.stripeRefusal(ctx, customerID); err != nil {
		return "", err
	}
	sess, err := s.pay.CreateCheckoutSession(ctx, payments.CheckoutParams{
		CustomerID:  customerID,
		UserID:      u.ID,
		PriceID:     price.ID,
		SuccessURL:  s.cfg.PublicURL + "/billing/success?session_id={CHECKOUT_SESSION_ID}",
		CancelURL:   s.cfg.PublicURL + "/billing/cancel",
		CheckoutKey: key,
	}, key)
	if err != nil {
		return "", s.providerError("create checkout session", err, ErrCheckoutFailed)
	}
	if sess.URL == "" {
		return "", ErrCheckoutFailed
	}
	// A checkout running at the same time may have created its session
	// after the sweep above: of the open sessions the newest stays.
	if err := s.expireOtherCheckouts(ctx, u.ID, customerID, key, clientKey, sess.ID); err != nil {
		return "", err
	}
	// And its session may have been paid meanwhile, which the sweep, of
	// open sessions, does not see: then this one must not be paid too.
	// (Stripe cannot make two sessions exclusive; this leaves a window of
	// the few milliseconds between this read and the answer.)
	if err := s.stripeRefusal(ctx, customerID); err != nil {
		if xerr := s.expireSession(ctx, u.ID, clientKey, sess.ID); xerr != nil {
			return "", xerr
		}
		return "", err
	}
	return sess.URL, nil
}

// checkoutPrice is the price a checkout of plan (Pro when unspecified) and
// recurring sells, and the Stripe idempotency key of its session.
func (s *Service) checkoutPrice(ctx context.Context, u User, plan billingv1.Plan, recurring billingv1.Recurring, clientKey string) (payments.Price, string, error) {
	if plan == billingv1.Plan_PLAN_UNSPECIFIED {
		plan = billingv1.Plan_PLAN_PRO
	}
	price, err := s.price(ctx, plan, recurring)
	if err != nil {
		return payments.Price{}, "", err
	}
	return price, idempotencyKey(u.ID, "checkout", clientKey, price.ID), nil
}

// ReplayCheckout is the answer to a checkout retried with its client key
// after it answered url. While url's session can be paid, or once it was
// paid, that is url. Once it expired (a newer checkout of the user expired
// it, or Stripe did after a day unpaid) it is the page of the user's newest
// open checkout when that sells the same plan and cycle; else
// SUBSCRIPTION_ALREADY_EXISTS when the user has subscribed meanwhile, or
// CHECKOUT_EXPIRED, so that the user is never sent to a page Stripe shows
// as expired.
func (s *Service) ReplayCheckout(ctx context.Context, u User, plan billingv1.Plan, recurring billingv1.Recurring, clientKey, url string) (string, error) {
	cust, ok := s.st.CustomerByUser(u.ID)
	if !ok {
		// No customer linked, so no session billing could look up.
		return url, nil
	}
	price, key, err := s.checkoutPrice(ctx, u, plan, recurring, clientKey)
	if err != nil {
		return "", err
	}
	own, err := s.pay.FindCheckoutSession(ctx, cust.GetCustomerId(), key)
	switch {
	case err == nil && own.Status != "expired":
		return url, nil
	case err != nil && !errors.Is(err, payments.ErrNotFound):
		return "", s.providerError("find checkout session", err, ErrCheckoutFailed)
	}
	open, err := s.pay.ListOpenCheckoutSessions(ctx, cust.GetCustomerId())
	if err != nil {
		return "", s.providerError("list checkout sessions", err, ErrCheckoutFailed)
	}
	for _, cs := range open {
		if cs.Mode != "subscription" {
			continue
		}
		// Only the newest can be paid (a checkout expires the others). It
		// may be url's own session, found by its page when its key is not
		// found (a price replaced since under the same lookup key).
		if cs.URL != "" && (cs.URL == url || cs.PriceID == price.ID) {
			return cs.URL, nil
		}
		break
	}
	if err := s.stripeRefusal(ctx, cust.GetCustomerId()); err != nil {
		return "", err
	}
	return "", ErrCheckoutExpired
}

// stripeRefusal asks Stripe for the customer's subscriptions, and answers
// refusal's error for them (nil when every one has ended).
func (s *Service) stripeRefusal(ctx context.Context, customerID string) error {
	subs, err := s.pay.ListSubscriptions(ctx, customerID)
	if err != nil {
		return s.providerError("list subscriptions", err, ErrCheckoutFailed)
	}
	statuses := make([]billingv1.SubscriptionStatus, len(subs))
	for i, sub := range subs {
		statuses[i] = subscriptionStatuses[sub.Status]
	}
	return refusal(statuses...)
}

// refusal is the error refusing a checkout while a subscription in one of
// statuses has not ended, paid or not (once Stripe's retries collect a
// past-due one, the user would pay twice); nil when all ended.
func refusal(statuses ...billingv1.SubscriptionStatus) error {
	var err error
	for _, st := range statuses {
		switch {
		case entitled(st):
			return ErrSubscriptionExists
		case !ended(st):
			err = ErrSubscriptionUnsettled
		}
	}
	return err
}

// expireOtherCheckouts expires the customer's open subscription-mode
// checkout sessions that belong to other checkouts than key's. With
// newest set (the session of key's checkout), only the sessions Stripe
// lists after it, older ones, are expired, so that of two checkouts running
// at once the newer session is kept by both; when newest is no longer open
// nothing is expired. A session that is no longer open when expired
// (completed or expired meanwhile) is left: a completed one shows in the
// subscriptions read afterwards.
func (s *Service) expireOtherCheckouts(ctx context.Context, userID, customerID, key, clientKey, newest string) error {
	open, err := s.pay.ListOpenCheckoutSessions(ctx, customerID)
	if err != nil {
		return s.providerError("list checkout sessions", err, ErrCheckoutFailed)
	}
	older := newest == ""
	for _, cs := range open {
		if !older {
			older = cs.ID == newest
			continue
		}
		if cs.Mode != "subscription" || cs.CheckoutKey == key {
			continue
		}
		if err := s.expireSession(ctx, userID, clientKey, cs.ID); err != nil {
			return err
		}
	}
	return nil
}

// expireSession expires checkout session id. A session that is no longer
// open when expired (completed or expired meanwhile) is left as it is.
func (s *Service) expireSession(ctx context.Context, userID, clientKey, id string) error {
	err := s.pay.ExpireCheckoutSession(ctx, id, idempotencyKey(userID, "expire-checkout", clientKey, id))
	if err == nil {
		return nil
	}
	if got, gerr := s.pay.GetCheckoutSession(ctx, id); gerr == nil && got.Status != "open" {
		return nil
	}
	return s.providerError("expire checkout session", err, ErrCheckoutFailed)
}

// Portal creates a billing portal session and returns its URL.
func (s *Service) Portal(ctx context.Context, u User, clientKey string) (string, error) {
	rec, ok := s.st.CustomerByUser(u.ID)
	if !ok {
		return "", ErrNoCustomer
	}
	url, err := s.pay.CreatePortalSession(ctx, rec.GetCustomerId(), s.cfg.PublicURL+"/billing",
		idempotencyKey(u.ID, "portal", clientKey))
	if err != nil {
		return "", s.providerError("create portal session", err, ErrPortalFailed)
	}
	if url == "" {
		return "", ErrPortalFailed
	}
	return url, nil
}

// Cancel cancels the current subscription at the end of its period. A
// scheduled change of cycle is dropped from Stripe (a schedule-managed
// subscription cannot be canceled directly) and remembered, so resuming
// schedules it again. It is remembered before the schedule is released, so
// a cancel failing after the release loses nothing, and its retry finishes
// the job.
//
// Billing's copy can lag behind Stripe (a change of cycle made in the
// billing portal, an event not applied yet): when Stripe refuses the
// cancellation, the subscription is read again and the cancel runs once
// more on what Stripe holds, releasing the schedule Stripe reports. One
// canceled meanwhile answers as canceled.
func (s *Service) Cancel(ctx context.Context, u User, clientKey string) (*billingv1.SubscriptionRecord, error) {
	rec := s.Current(u.ID)
	if rec == nil {
		return nil, ErrNoSubscription
	}
	sub := rec.GetSubscription()
	if ended(sub.GetStatus()) || rec.GetCancelAtPeriodEnd() {
		return nil, ErrCanceled
	}
	restore, err := s.cancel(ctx, u, rec, clientKey)
	if errors.Is(err, ErrProviderRefused) {
		rec, err = s.SyncSubscription(ctx, sub.GetId(), nil)
		switch {
		case err != nil:
			return nil, s.providerError("get subscription", err, nil)
		case ended(rec.GetSubscription().GetStatus()):
			return nil, ErrCanceled
		case rec.GetCancelAtPeriodEnd():
			return rec, nil
		}
		restore, err = s.cancel(ctx, u, rec, afterSync(clientKey, rec))
	}
	if err != nil {
		return nil, err
	}
	return s.SyncSubscription(ctx, sub.GetId(), func(r *billingv1.SubscriptionRecord) {
		if restore != billingv1.Recurring_RECURRING_UNSPECIFIED {
			r.RestoreRecurring = restore
		}
	})
}

// cancel remembers rec's scheduled change of cycle, releases its schedule
// and cancels it at Stripe; it returns the change remembered.
func (s *Service) cancel(ctx context.Context, u User, rec *billingv1.SubscriptionRecord, clientKey string) (billingv1.Recurring, error) {
	sub := rec.GetSubscription()
	restore, err := s.dropSchedule(ctx, u.ID, rec, clientKey)
	if err != nil {
		return restore, err
	}
	if _, err := s.pay.SetCancelAtPeriodEnd(ctx, sub.GetId(), true, idempotencyKey(u.ID, "cancel", clientKey, sub.GetId())); err != nil {
		return restore, s.providerError("cancel subscription", err, nil)
	}
	return restore, nil
}

// dropSchedule releases rec's schedule, if it holds one, after remembering
// the change of cycle to schedule again on resume: the one the schedule
// holds, else one an earlier attempt remembered before it released the
// schedule and failed. It returns the change remembered.
func (s *Service) dropSchedule(ctx context.Context, userID string, rec *billingv1.SubscriptionRecord, clientKey string) (billingv1.Recurring, error) {
	restore := rec.GetSubscription().GetPendingRecurring()
	if restore == billingv1.Recurring_RECURRING_UNSPECIFIED {
		restore = rec.GetRestoreRecurring()
	}
	if err := s.rememberRestore(ctx, userID, rec, restore); err != nil {
		return restore, err
	}
	if rec.GetScheduleId() == "" {
		return restore, nil
	}
	return restore, s.releaseSchedule(ctx, userID, rec.GetScheduleId(), clientKey)
}

// rememberRestore stores restore as rec's change of cycle to schedule again
// on resume, before a schedule holding it is released, so that a failure
// after the release loses nothing.
func (s *Service) rememberRestore(ctx context.Context, userID string, rec *billingv1.SubscriptionRecord, restore billingv1.Recurring) error {
	if restore == billingv1.Recurring_RECURRING_UNSPECIFIED || restore == rec.GetRestoreRecurring() {
		return nil
	}
	if _, err := s.st.UpsertSubscription(ctx, userID, rec.GetSubscription().GetId(), func(r *billingv1.SubscriptionRecord, ok bool) error {
		if !ok {
			return kvmirror.ErrSkip
		}
		r.RestoreRecurring = restore
		return nil
	}); err != nil {
		return fmt.Errorf("remember the scheduled change: %w", err)
	}
	return nil
}

// Resume undoes a cancellation before the period ends, and schedules again
// the change of cycle the cancel dropped from Stripe.
//
// Billing's copy can lag behind Stripe (a subscription resumed or changed
// in the billing portal, a schedule billing has not seen, an event not
// applied yet): when Stripe refuses the resume, the subscription is read
// again and the resume runs once more on what Stripe holds, releasing the
// schedule Stripe reports and keeping its change of cycle. One no longer
// canceled meanwhile answers as it is.
func (s *Service) Resume(ctx context.Context, u User, clientKey string) (*billingv1.SubscriptionRecord, error) {
	rec := s.Current(u.ID)
	if rec == nil {
		return nil, ErrNoSubscription
	}
	if err := s.resumable(rec); err != nil {
		return nil, err
	}
	out, err := s.resume(ctx, u, rec, clientKey)
	if !errors.Is(err, ErrProviderRefused) {
		return out, err
	}
	rec, err = s.SyncSubscription(ctx, rec.GetSubscription().GetId(), nil)
	if err != nil {
		return nil, s.providerError("get subscription", err, nil)
	}
	if err := s.resumable(rec); errors.Is(err, ErrNotCanceled) {
		return rec, nil
	} else if err != nil {
		return nil, err
	}
	return s.resume(ctx, u, rec, afterSync(clientKey, rec))
}

// resumable tells whether rec can be resumed: ErrExpired once it ended or
// its period is over, ErrNotCanceled when it is not canceled.
func (s *Service) resumable(rec *billingv1.SubscriptionRecord) error {
	sub := rec.GetSubscription()
	if ended(sub.GetStatus()) || (sub.GetEnd() != nil && !sub.GetEnd().AsTime().After(s.cfg.Now())) {
		return ErrExpired
	}
	if !rec.GetCancelAtPeriodEnd() {
		return ErrNotCanceled
	}
	return nil
}

// resume resumes rec at Stripe: a schedule it holds is released first (its
// change of cycle remembered, as cancel does), then the cancellation is
// undone and the remembered change scheduled again.
func (s *Service) resume(ctx context.Context, u User, rec *billingv1.SubscriptionRecord, clientKey string) (*billingv1.SubscriptionRecord, error) {
	sub := rec.GetSubscription()
	restore := rec.GetRestoreRecurring()
	if rec.GetScheduleId() != "" {
		var err error
		if restore, err = s.dropSchedule(ctx, u.ID, rec, clientKey); err != nil {
			return nil, err
		}
	}
	if _, err := s.pay.SetCancelAtPeriodEnd(ctx, sub.GetId(), false, idempotencyKey(u.ID, "resume", clientKey, sub.GetId())); err != nil {
		return nil, s.providerError("resume subscription", err, nil)
	}
	if restore != billingv1.Recurring_RECURRING_UNSPECIFIED && restore != billedRecurring(sub) {
		price, err := s.price(ctx, sub.GetPlan(), restore)
		if err == nil {
			_, err = s.pay.ScheduleChange(ctx, sub.GetId(), "", price.ID, idempotencyKey(u.ID, "reschedule", clientKey, sub.GetId(), price.ID))
		}
		if err != nil {
			// The resume itself went through; the user can ask for the
			// change again.
			s.log.Warn("could not restore a scheduled change of cycle", "subscription", sub.GetId(), "err", err)
		}
	}
	return s.SyncSubscription(ctx, sub.GetId(), forgetRestore)
}

// ChangeRecurring switches the cycle at the end of the current period
// through a subscription schedule (no proration). Asking for the cycle
// billed now while a change is scheduled releases the schedule; asking for
// the cycle already chosen is SAME_SUBSCRIPTION_RECURRING.
//
// Billing's copy can lag behind Stripe (a second click's schedule, a change
// made in the billing portal, an event not applied yet): when Stripe
// refuses, or before answering SAME_SUBSCRIPTION_RECURRING from that copy,
// the subscription is read again and the change decided once more on what
// Stripe holds. A change already in place, made meanwhile, is the answer.
func (s *Service) ChangeRecurring(ctx context.Context, u User, target billingv1.Recurring, clientKey string) (*billingv1.SubscriptionRecord, error) {
	if target == billingv1.Recurring_RECURRING_UNSPECIFIED {
		return nil, BadRequest("recurring is required")
	}
	rec := s.Current(u.ID)
	if rec == nil {
		return nil, ErrNoSubscription
	}
	out, err := s.changeRecurring(ctx, u, rec, target, clientKey)
	// SAME_SUBSCRIPTION_RECURRING is checked against Stripe too (a rare
	// answer): a switch made in the billing portal makes billing's copy
	// show the cycle asked for as chosen when Stripe holds another.
	same := errors.Is(err, ErrSameRecurring)
	if !same && !errors.Is(err, ErrProviderRefused) {
		return out, err
	}
	rec, err = s.SyncSubscription(ctx, rec.GetSubscription().GetId(), nil)
	switch {
	case err != nil:
		return nil, s.providerError("get subscription", err, nil)
	case ended(rec.GetSubscription().GetStatus()) || rec.GetCancelAtPeriodEnd():
		return nil, ErrCanceled
	case chosenRecurring(rec.GetSubscription()) == target && same:
		return nil, ErrSameRecurring
	case chosenRecurring(rec.GetSubscription()) == target:
		return rec, nil
	}
	return s.changeRecurring(ctx, u, rec, target, afterSync(clientKey, rec))
}

// changeRecurring changes rec's cycle to target at Stripe.
func (s *Service) changeRecurring(ctx context.Context, u User, rec *billingv1.SubscriptionRecord, target billingv1.Recurring, clientKey string) (*billingv1.SubscriptionRecord, error) {
	sub := rec.GetSubscription()
	if ended(sub.GetStatus()) || rec.GetCancelAtPeriodEnd() {
		return nil, ErrCanceled
	}
	switch {
	case target == chosenRecurring(sub):
		return nil, ErrSameRecurring
	case sub.GetPendingRecurring() != billingv1.Recurring_RECURRING_UNSPECIFIED && target == billedRecurring(sub):
		if err := s.releaseSchedule(ctx, u.ID, rec.GetScheduleId(), clientKey); err != nil {
			return nil, err
		}
		return s.SyncSubscription(ctx, sub.GetId(), forgetRestore)
	}
	price, err := s.price(ctx, sub.GetPlan(), target)
	if err != nil {
		return nil, err
	}
	if _, err := s.pay.ScheduleChange(ctx, sub.GetId(), rec.GetScheduleId(), price.ID,
		idempotencyKey(u.ID, "schedule", clientKey, sub.GetId(), price.ID)); err != nil {
		return nil, s.providerError("schedule change", err, nil)
	}
	return s.SyncSubscription(ctx, sub.GetId(), forgetRestore)
}

// billedRecurring is the cycle billed in sub's current period. Records
// stored before billed_recurring existed held it in recurring.
func billedRecurring(sub *billingv1.Subscription) billingv1.Recurring {
	if b := sub.GetBilledRecurring(); b != billingv1.Recurring_RECURRING_UNSPECIFIED {
		return b
	}
	return sub.GetRecurring()
}

// chosenRecurring is the cycle the user chose: the one a scheduled change
// switches to, else the one billed now.
func chosenRecurring(sub *billingv1.Subscription) billingv1.Recurring {
	if p := sub.GetPendingRecurring(); p != billingv1.Recurring_RECURRING_UNSPECIFIED {
		return p
	}
	return sub.GetRecurring()
}

// View is a stored subscription as users see it: recurring is the chosen
// cycle and billed_recurring the cycle billed now, also for a record stored
// before billed_recurring existed (whose recurring was the cycle billed
// now), until its next sync rewrites it.
func View(rec *billingv1.SubscriptionRecord) *billingv1.Subscription {
	sub := rec.GetSubscription()
	if sub == nil || sub.GetBilledRecurring() != billingv1.Recurring_RECURRING_UNSPECIFIED || sub.GetRecurring() == billingv1.Recurring_RECURRING_UNSPECIFIED {
		return sub
	}
	v := proto.CloneOf(sub)
	v.BilledRecurring = billedRecurring(sub)
	v.Recurring = chosenRecurring(sub)
	return v
}

// afterSync is the client key of an action tried again on what Stripe holds
// after it refused the first try: Stripe keeps a refusal under its
// idempotency key, so every write of the second try (a release, a cancel,
// a schedule) needs a key of its own. Without a client key each write gets
// a fresh one anyway.
func afterSync(clientKey string, rec *billingv1.SubscriptionRecord) string {
	if clientKey == "" {
		return ""
	}
	return clientKey + "\x00after-sync:" + rec.GetScheduleId()
}

// forgetRestore drops a change of cycle a failed cancel left remembered:
// the user chose the cycle anew.
func forgetRestore(r *billingv1.SubscriptionRecord) {
	r.RestoreRecurring = billingv1.Recurring_RECURRING_UNSPECIFIED
}

// releaseSchedule releases a subscription schedule. One that no longer
// manages its subscription counts as released: Stripe refuses to release it
// again, and an earlier attempt may have released it before failing.
func (s *Service) releaseSchedule(ctx context.Context, userID, scheduleID, clientKey string) error {
	err := s.pay.ReleaseSchedule(ctx, scheduleID, idempotencyKey(userID, "release", clientKey, scheduleID))
	if err == nil {
		return nil
	}
	if sch, gerr := s.pay.GetSchedule(ctx, scheduleID); gerr == nil && sch.Status != "active" && sch.Status != "not_started" {
		s.log.Debug("schedule already released", "schedule", scheduleID, "status", sch.Status)
		return nil
	}
	return s.providerError("release schedule", err, nil)
}

// ErrForeignCustomer is returned when a Stripe object belongs to a customer
// switchboard did not create (no metadata.user_id): it is not ours to show.
var ErrForeignCustomer = errors.New("customer has no switchboard user")

// userFor resolves a Stripe customer to its user.
func (s *Service) userFor(ctx context.Context, customerID string) (string, error) {
	if customerID == "" {
		return "", ErrForeignCustomer
	}
	if rec, ok := s.st.UserByCustomer(customerID); ok {
		return rec.GetUserId(), nil
	}
	c, err := s.pay.GetCustomer(ctx, customerID)
	if err != nil {
		return "", fmt.Errorf("get customer %s: %w", customerID, err)
	}
	if c.UserID == "" {
		return "", ErrForeignCustomer
	}
	rec, err := s.st.LinkCustomer(ctx, &billingv1.CustomerRecord{UserId: c.UserID, CustomerId: c.ID, Email: c.Email})
	if err != nil {
		return "", err
	}
	if rec.GetCustomerId() != c.ID {
		// The user already has another customer: both stay linked back to
		// the user, the first one remains the user's customer.
		s.log.Warn("user has a second stripe customer", "customer", c.ID, "kept", rec.GetCustomerId())
	}
	return c.UserID, nil
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// SyncCheckoutSession applies a completed checkout: it links the customer
// and syncs the new subscription.
func (s *Service) SyncCheckoutSession(ctx context.Context, sessionID string) error {
	sess, err := s.pay.GetCheckoutSession(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("get checkout session: %w", err)
	}
	if _, err := s.userFor(ctx, sess.CustomerID); err != nil {
		return err
	}
	if sess.SubscriptionID == "" {
		return nil
	}
	_, err = s.SyncSubscription(ctx, sess.SubscriptionID, nil)
	return err
}

// SyncSubscription re-reads a subscription (and its schedule) from Stripe
// and stores it with compare-and-swap; a read older than the stored one is
// dropped. mutate, when set, adjusts the record before it is written.
func (s *Service) SyncSubscription(ctx context.Context, id string, mutate func(*billingv1.SubscriptionRecord)) (*billingv1.SubscriptionRecord, error) {
	fetchedAt := s.cfg.Now()
	sub, err := s.pay.GetSubscription(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get subscription %s: %w", id, err)
	}
	userID, err := s.userFor(ctx, sub.CustomerID)
	if err != nil {
		return nil, err
	}
	var pending billingv1.Recurring
	var changesAt time.Time
	if sub.ScheduleID != "" {
		sch, err := s.pay.GetSchedule(ctx, sub.ScheduleID)
		if err != nil {
			return nil, fmt.Errorf("get schedule %s: %w", sub.ScheduleID, err)
		}
		for _, ph := range sch.Phases {
			if ph.LookupKey == sub.LookupKey || ph.Start.Before(sub.CurrentPeriodEnd) {
				continue
			}
			if _, r, ok := ParseLookupKey(ph.LookupKey); ok {
				pending, changesAt = r, ph.Start
				break
			}
		}
	}
	plan, billed, _ := ParseLookupKey(sub.LookupKey)
	recurring := billed
	if pending != billingv1.Recurring_RECURRING_UNSPECIFIED {
		recurring = pending
	}
	status := subscriptionStatuses[sub.Status]
	now := s.cfg.Now()
	return s.st.UpsertSubscription(ctx, userID, sub.ID, func(rec *billingv1.SubscriptionRecord, ok bool) error {
		if ok && rec.GetSyncedAt().AsTime().After(fetchedAt) {
			// mutate is skipped too: what it records must not depend on
			// this write alone (Cancel remembers its change beforehand).
			return kvmirror.ErrSkip
		}
		// A change remembered while the subscription was not canceled is
		// a cancel under way (or failed after releasing the schedule): it
		// stays. One remembered while canceled goes once the subscription
		// is no longer canceled (resumed) or ended.
		resumed := ok && rec.GetCancelAtPeriodEnd() && !sub.CancelAtPeriodEnd
		v := &billingv1.Subscription{
			Id:                 sub.ID,
			Plan:               plan,
			Recurring:          recurring,
			BilledRecurring:    billed,
			Status:             status,
			Start:              ts(sub.CurrentPeriodStart),
			End:                ts(sub.CurrentPeriodEnd),
			TrialStart:         ts(sub.TrialStart),
			TrialEnd:           ts(sub.TrialEnd),
			CanceledAt:         ts(sub.CanceledAt),
			CreatedAt:          ts(sub.Created),
			UpdatedAt:          timestamppb.New(now),
			PendingRecurring:   pending,
			RecurringChangesAt: ts(changesAt),
		}
		if entitled(status) && !sub.CancelAtPeriodEnd {
			v.NextBillAt = ts(sub.CurrentPeriodEnd)
		}
		if v.CreatedAt == nil {
			v.CreatedAt = timestamppb.New(now)
		}
		rec.UserId = userID
		rec.CustomerId = sub.CustomerID
		rec.Subscription = v
		rec.ScheduleId = sub.ScheduleID
		rec.CancelAtPeriodEnd = sub.CancelAtPeriodEnd
		rec.SyncedAt = timestamppb.New(fetchedAt)
		if ended(status) || resumed {
			rec.RestoreRecurring = billingv1.Recurring_RECURRING_UNSPECIFIED
		}
		if mutate != nil {
			mutate(rec)
		}
		return nil
	})
}

// MarkSubscriptionEnded marks a subscription Stripe no longer knows as
// canceled, keeping it.
func (s *Service) MarkSubscriptionEnded(ctx context.Context, id string) error {
	var owner string
	s.st.AllSubscriptions(func(r *billingv1.SubscriptionRecord) bool {
		if r.GetSubscription().GetId() == id {
			owner = r.GetUserId()
			return false
		}
		return true
	})
	if owner == "" {
		return nil
	}
	now := s.cfg.Now()
	_, err := s.st.UpsertSubscription(ctx, owner, id, func(rec *billingv1.SubscriptionRecord, ok bool) error {
		if !ok {
			return kvmirror.ErrSkip
		}
		sub := rec.GetSubscription()
		sub.Status = billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_CANCELED
		sub.NextBillAt = nil
		if sub.CanceledAt == nil {
			sub.CanceledAt = timestamppb.New(now)
		}
		sub.UpdatedAt = timestamppb.New(now)
		rec.RestoreRecurring = billingv1.Recurring_RECURRING_UNSPECIFIED
		return nil
	})
	return err
}

// LastPaymentError is the text shown for an invoice's last failure: the
// card error's message, a generic text for other payment errors, or the
// finalization error's message.
func LastPaymentError(inv *payments.Invoice) string {
	switch {
	case inv.PaymentError != nil && inv.PaymentError.Type == "card_error":
		if inv.PaymentError.Message == "" {
			return "Failed to pay"
		}
		return inv.PaymentError.Message
	case inv.PaymentError != nil:
		return "Internal Payment error"
	case inv.FinalizationError != nil:
		if inv.FinalizationError.Message == "" {
			return "Failed to finalize the invoice"
		}
		return inv.FinalizationError.Message
	}
	return ""
}

// SyncInvoice re-reads an invoice from Stripe and stores it. An invoice
// Stripe no longer has (a draft deleted at Stripe) is removed from its
// user's invoices, and the record returned is nil.
func (s *Service) SyncInvoice(ctx context.Context, id string) (*billingv1.InvoiceRecord, error) {
	fetchedAt := s.cfg.Now()
	inv, err := s.pay.GetInvoice(ctx, id)
	if errors.Is(err, payments.ErrNotFound) {
		if err := s.st.DeleteInvoice(ctx, id); err != nil {
			return nil, fmt.Errorf("forget deleted invoice %s: %w", id, err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get invoice %s: %w", id, err)
	}
	userID, err := s.userFor(ctx, inv.CustomerID)
	if err != nil {
		return nil, err
	}
	plan, recurring, _ := ParseLookupKey(inv.LookupKey)
	now := s.cfg.Now()
	return s.st.UpsertInvoice(ctx, userID, inv.ID, func(rec *billingv1.InvoiceRecord, ok bool) error {
		if ok && rec.GetSyncedAt().AsTime().After(fetchedAt) {
			return kvmirror.ErrSkip
		}
		rec.UserId = userID
		rec.CustomerId = inv.CustomerID
		rec.SubscriptionId = inv.SubscriptionID
		rec.SyncedAt = timestamppb.New(fetchedAt)
		created := ts(inv.Created)
		if created == nil {
			created = timestamppb.New(now)
		}
		rec.Invoice = &billingv1.Invoice{
			Id:               inv.ID,
			Plan:             plan,
			Recurring:        recurring,
			Currency:         strings.ToLower(inv.Currency),
			Amount:           inv.Total,
			Status:           invoiceStatuses[inv.Status],
			Reason:           inv.BillingReason,
			LastPaymentError: LastPaymentError(inv),
			Link:             inv.HostedURL,
			CreatedAt:        created,
			UpdatedAt:        timestamppb.New(now),
		}
		return nil
	})
}

// Reconcile re-reads every subscription that has not ended.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	var ids []string
	s.st.AllSubscriptions(func(r *billingv1.SubscriptionRecord) bool {
		if !ended(r.GetSubscription().GetStatus()) {
			ids = append(ids, r.GetSubscription().GetId())
		}
		return true
	})
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		if _, err := s.SyncSubscription(ctx, id, nil); err != nil {
			if errors.Is(err, payments.ErrNotFound) {
				err = s.MarkSubscriptionEnded(ctx, id)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return len(ids), errors.Join(errs...)
}
