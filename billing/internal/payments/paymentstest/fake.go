// Package paymentstest is a stateful in-memory Stripe behind the payments
// interface, for tests. It behaves like Stripe where billing relies on it:
// objects keep state between calls, every write needs an idempotency key
// and a reused key returns the first answer, a subscription managed by a
// schedule refuses direct cancellation changes, an expired checkout session
// cannot be paid, failures can be injected per operation, and a write (or a
// read of a subscription or of the prices) can be held at a gate to line up
// concurrent calls. Helpers drive what Stripe would do on its own (complete a
// checkout, renew, fail a payment) and build the events it would send.
package paymentstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/switchboardhq/switchboard/billing/internal/payments"
)

// Operation names, for FailNext and Calls.
const (
	OpCreateCustomer  = "CreateCustomer"
	OpGetCustomer     = "GetCustomer"
	OpListPrices      = "ListPrices"
	OpCreateCheckout  = "CreateCheckoutSession"
	OpGetCheckout     = "GetCheckoutSession"
	OpListCheckouts   = "ListOpenCheckoutSessions"
	OpFindCheckout    = "FindCheckoutSession"
	OpExpireCheckout  = "ExpireCheckoutSession"
	OpCreatePortal    = "CreatePortalSession"
	OpGetSubscription = "GetSubscription"
	OpListSubs        = "ListSubscriptions"
	OpSetCancel       = "SetCancelAtPeriodEnd"
	OpGetSchedule     = "GetSchedule"
	OpScheduleChange  = "ScheduleChange"
	OpReleaseSchedule = "ReleaseSchedule"
	OpGetInvoice      = "GetInvoice"
)

// Call is one recorded call.
type Call struct {
	Op             string
	IdempotencyKey string
}

// Fake is the in-memory Stripe.
type Fake struct {
	mu        sync.Mutex
	now       func() time.Time
	seq       int
	customers map[string]*payments.Customer
	prices    map[string]payments.Price // by id
	sessions  map[string]*payments.CheckoutSession
	sessPrice map[string]string // session id -> price id
	subs      map[string]*payments.Subscription
	schedules map[string]*payments.Schedule
	invoices  map[string]*payments.Invoice
	idem      map[string]idemEntry
	failures  map[string][]error
	holds     map[string]*Gate
	calls     []Call
}

type idemEntry struct {
	fingerprint string
	result      any
}

var _ payments.Provider = (*Fake)(nil)

// Standard prices of a new Fake, by lookup key, in USD cents.
var StandardPrices = map[string]int64{
	"pro_monthly":  800,
	"pro_yearly":   8100,
	"team_monthly": 1500,
	"team_yearly":  14400,
}

// New returns a Fake holding StandardPrices.
func New() *Fake {
	f := &Fake{
		now:       time.Now,
		customers: map[string]*payments.Customer{},
		prices:    map[string]payments.Price{},
		sessions:  map[string]*payments.CheckoutSession{},
		sessPrice: map[string]string{},
		subs:      map[string]*payments.Subscription{},
		schedules: map[string]*payments.Schedule{},
		invoices:  map[string]*payments.Invoice{},
		idem:      map[string]idemEntry{},
		failures:  map[string][]error{},
		holds:     map[string]*Gate{},
	}
	keys := make([]string, 0, len(StandardPrices))
	for k := range StandardPrices {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		id := f.newID("price")
		f.prices[id] = payments.Price{ID: id, LookupKey: k, Currency: "usd", UnitAmount: StandardPrices[k]}
	}
	return f
}

// SetNow replaces the fake's clock.
func (f *Fake) SetNow(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// FailNext makes the next call of op fail with err (queued per op). A nil
// err lets that call through, so that a failure queued after it hits a
// later call.
func (f *Fake) FailNext(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[op] = append(f.failures[op], err)
}

// Gate holds one call of an operation until released, so that a test can
// line up concurrent calls.
type Gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// Entered is closed when the held call arrived at the gate.
func (g *Gate) Entered() <-chan struct{} { return g.entered }

// Release lets the held call go on (and any later one through this gate).
func (g *Gate) Release() { g.once.Do(func() { close(g.release) }) }

// Hold makes the next call of op wait at the returned gate before it takes
// effect; other operations go on meanwhile.
func (f *Fake) Hold(op string) *Gate {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &Gate{entered: make(chan struct{}), release: make(chan struct{})}
	f.holds[op] = g
	return g
}

// hold waits at op's gate, if one is set; called before taking the lock.
func (f *Fake) hold(ctx context.Context, op string) error {
	f.mu.Lock()
	g := f.holds[op]
	delete(f.holds, op)
	f.mu.Unlock()
	if g == nil {
		return nil
	}
	close(g.entered)
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unavailable is an error like Stripe's when it cannot be reached.
func Unavailable() error {
	return &payments.APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Message: "stripe is unavailable"}
}

// Calls returns the calls made so far.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Customers returns a copy of every customer.
func (f *Fake) Customers() []payments.Customer {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []payments.Customer
	for _, c := range f.customers {
		out = append(out, *c)
	}
	return out
}

// Subscription returns a copy of a subscription.
func (f *Fake) Subscription(id string) (payments.Subscription, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.subs[id]
	if !ok {
		return payments.Subscription{}, false
	}
	return *s, true
}

// Session returns a copy of a checkout session.
func (f *Fake) Session(id string) (payments.CheckoutSession, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return payments.CheckoutSession{}, false
	}
	return *s, true
}

// SessionByURL finds the checkout session behind a checkout URL.
func (f *Fake) SessionByURL(url string) (payments.CheckoutSession, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		if s.URL == url {
			return *s, true
		}
	}
	return payments.CheckoutSession{}, false
}

func (f *Fake) newID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s_fake%06d", prefix, f.seq)
}

// begin records a call, consumes an injected failure and checks the
// idempotency key of writes. It returns a cached result for a replayed key.
func (f *Fake) begin(op, key string, write bool, fingerprint string) (any, error) {
	f.calls = append(f.calls, Call{Op: op, IdempotencyKey: key})
	if q := f.failures[op]; len(q) > 0 {
		err := q[0]
		f.failures[op] = q[1:]
		if err != nil {
			return nil, err
		}
	}
	if !write {
		return nil, nil
	}
	if key == "" {
		return nil, &payments.APIError{Status: 400, Type: "invalid_request_error", Message: "fake: every write needs an idempotency key"}
	}
	if e, ok := f.idem[op+"|"+key]; ok {
		if e.fingerprint != fingerprint {
			return nil, &payments.APIError{Status: 400, Type: "idempotency_error", Message: "Keys for idempotent requests can only be used with the same parameters they were first used with."}
		}
		return e.result, nil
	}
	return nil, nil
}

func (f *Fake) remember(op, key, fingerprint string, result any) {
	f.idem[op+"|"+key] = idemEntry{fingerprint: fingerprint, result: result}
}

func notFound(kind, id string) error {
	return fmt.Errorf("%w: no such %s: '%s'", payments.ErrNotFound, kind, id)
}

func badRequest(msg string) error {
	return &payments.APIError{Status: 400, Type: "invalid_request_error", Message: msg}
}

// CreateCustomer implements payments.Provider.
func (f *Fake) CreateCustomer(ctx context.Context, userID, email, key string) (*payments.Customer, error) {
	if err := f.hold(ctx, OpCreateCustomer); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := userID + "|" + email
	if r, err := f.begin(OpCreateCustomer, key, true, fp); err != nil || r != nil {
		return cloneCustomer(r), err
	}
	c := &payments.Customer{ID: f.newID("cus"), Email: email, UserID: userID}
	f.customers[c.ID] = c
	f.remember(OpCreateCustomer, key, fp, c)
	return cloneCustomer(c), nil
}

func cloneCustomer(r any) *payments.Customer {
	if r == nil {
		return nil
	}
	c := *r.(*payments.Customer)
	return &c
}

// GetCustomer implements payments.Provider.
func (f *Fake) GetCustomer(_ context.Context, id string) (*payments.Customer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpGetCustomer, "", false, ""); err != nil {
		return nil, err
	}
	c, ok := f.customers[id]
	if !ok {
		return nil, notFound("customer", id)
	}
	return cloneCustomer(c), nil
}

// ListPrices implements payments.Provider.
func (f *Fake) ListPrices(ctx context.Context, lookupKeys []string) ([]payments.Price, error) {
	if err := f.hold(ctx, OpListPrices); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpListPrices, "", false, ""); err != nil {
		return nil, err
	}
	var out []payments.Price
	for _, p := range f.prices {
		if slices.Contains(lookupKeys, p.LookupKey) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b payments.Price) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// CreateCheckoutSession implements payments.Provider.
func (f *Fake) CreateCheckoutSession(ctx context.Context, p payments.CheckoutParams, key string) (*payments.CheckoutSession, error) {
	if err := f.hold(ctx, OpCreateCheckout); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := fmt.Sprintf("%+v", p)
	if r, err := f.begin(OpCreateCheckout, key, true, fp); err != nil || r != nil {
		return cloneSession(r), err
	}
	if _, ok := f.customers[p.CustomerID]; !ok {
		return nil, badRequest("No such customer: '" + p.CustomerID + "'")
	}
	if _, ok := f.prices[p.PriceID]; !ok {
		return nil, badRequest("No such price: '" + p.PriceID + "'")
	}
	if p.SuccessURL == "" || p.CancelURL == "" {
		return nil, badRequest("success_url and cancel_url are required")
	}
	id := f.newID("cs")
	s := &payments.CheckoutSession{
		ID: id, URL: "https://checkout.stripe.test/c/pay/" + id,
		CustomerID: p.CustomerID, ClientReferenceID: p.UserID, Status: "open",
		Mode: "subscription", CheckoutKey: p.CheckoutKey, PriceID: p.PriceID,
	}
	f.sessions[id] = s
	f.sessPrice[id] = p.PriceID
	f.remember(OpCreateCheckout, key, fp, s)
	return cloneSession(s), nil
}

func cloneSession(r any) *payments.CheckoutSession {
	if r == nil {
		return nil
	}
	s := *r.(*payments.CheckoutSession)
	return &s
}

// GetCheckoutSession implements payments.Provider.
func (f *Fake) GetCheckoutSession(_ context.Context, id string) (*payments.CheckoutSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpGetCheckout, "", false, ""); err != nil {
		return nil, err
	}
	s, ok := f.sessions[id]
	if !ok {
		return nil, notFound("checkout.session", id)
	}
	return cloneSession(s), nil
}

// ListOpenCheckoutSessions implements payments.Provider.
func (f *Fake) ListOpenCheckoutSessions(_ context.Context, customerID string) ([]payments.CheckoutSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpListCheckouts, "", false, ""); err != nil {
		return nil, err
	}
	var out []payments.CheckoutSession
	for _, s := range f.sessions {
		if s.CustomerID == customerID && s.Status == "open" {
			out = append(out, *s)
		}
	}
	// IDs grow with creation: newest first, as Stripe lists.
	slices.SortFunc(out, func(a, b payments.CheckoutSession) int { return strings.Compare(b.ID, a.ID) })
	return out, nil
}

// FindCheckoutSession implements payments.Provider.
func (f *Fake) FindCheckoutSession(_ context.Context, customerID, checkoutKey string) (*payments.CheckoutSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpFindCheckout, "", false, ""); err != nil {
		return nil, err
	}
	var found *payments.CheckoutSession
	for _, s := range f.sessions {
		// IDs grow with creation: the newest is the greatest.
		if s.CustomerID == customerID && checkoutKey != "" && s.CheckoutKey == checkoutKey && (found == nil || s.ID > found.ID) {
			found = s
		}
	}
	if found == nil {
		return nil, notFound("checkout.session with checkout key", checkoutKey)
	}
	return cloneSession(found), nil
}

// ExpireCheckoutSession implements payments.Provider.
func (f *Fake) ExpireCheckoutSession(ctx context.Context, id, key string) error {
	if err := f.hold(ctx, OpExpireCheckout); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, err := f.begin(OpExpireCheckout, key, true, id); err != nil || r != nil {
		return err
	}
	s, ok := f.sessions[id]
	if !ok {
		return notFound("checkout.session", id)
	}
	if s.Status != "open" {
		return badRequest("Only Checkout Sessions with a status of `open` can be expired; this one is `" + s.Status + "`.")
	}
	s.Status = "expired"
	f.remember(OpExpireCheckout, key, id, "expired")
	return nil
}

// CreatePortalSession implements payments.Provider.
func (f *Fake) CreatePortalSession(ctx context.Context, customerID, returnURL, key string) (string, error) {
	if err := f.hold(ctx, OpCreatePortal); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := customerID + "|" + returnURL
	if r, err := f.begin(OpCreatePortal, key, true, fp); err != nil || r != nil {
		if err != nil {
			return "", err
		}
		return r.(string), nil
	}
	if _, ok := f.customers[customerID]; !ok {
		return "", badRequest("No such customer: '" + customerID + "'")
	}
	url := "https://billing.stripe.test/p/session/" + f.newID("bps")
	f.remember(OpCreatePortal, key, fp, url)
	return url, nil
}

// GetSubscription implements payments.Provider.
func (f *Fake) GetSubscription(ctx context.Context, id string) (*payments.Subscription, error) {
	if err := f.hold(ctx, OpGetSubscription); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpGetSubscription, "", false, ""); err != nil {
		return nil, err
	}
	s, ok := f.subs[id]
	if !ok {
		return nil, notFound("subscription", id)
	}
	c := *s
	return &c, nil
}

// ListSubscriptions implements payments.Provider.
func (f *Fake) ListSubscriptions(_ context.Context, customerID string) ([]payments.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpListSubs, "", false, ""); err != nil {
		return nil, err
	}
	var out []payments.Subscription
	for _, s := range f.subs {
		if s.CustomerID == customerID {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b payments.Subscription) int { return strings.Compare(b.ID, a.ID) })
	return out, nil
}

// SetCancelAtPeriodEnd implements payments.Provider.
func (f *Fake) SetCancelAtPeriodEnd(ctx context.Context, id string, cancel bool, key string) (*payments.Subscription, error) {
	if err := f.hold(ctx, OpSetCancel); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := fmt.Sprintf("%s|%t", id, cancel)
	if r, err := f.begin(OpSetCancel, key, true, fp); err != nil || r != nil {
		if err != nil {
			return nil, err
		}
		c := *r.(*payments.Subscription)
		return &c, nil
	}
	s, ok := f.subs[id]
	if !ok {
		return nil, notFound("subscription", id)
	}
	if s.Status == "canceled" || s.Status == "incomplete_expired" {
		return nil, badRequest("A canceled subscription can only update its cancellation_details and metadata.")
	}
	if s.ScheduleID != "" {
		return nil, badRequest("The subscription is managed by the subscription schedule `" + s.ScheduleID + "`, and updating any cancelation behavior directly is not allowed. Please update the schedule instead.")
	}
	s.CancelAtPeriodEnd = cancel
	if cancel {
		s.CanceledAt = f.now().UTC().Truncate(time.Second)
	} else {
		s.CanceledAt = time.Time{}
	}
	c := *s
	f.remember(OpSetCancel, key, fp, &c)
	return &c, nil
}

// GetSchedule implements payments.Provider.
func (f *Fake) GetSchedule(_ context.Context, id string) (*payments.Schedule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpGetSchedule, "", false, ""); err != nil {
		return nil, err
	}
	s, ok := f.schedules[id]
	if !ok {
		return nil, notFound("subscription_schedule", id)
	}
	return cloneSchedule(s), nil
}

func cloneSchedule(r any) *payments.Schedule {
	if r == nil {
		return nil
	}
	s := *r.(*payments.Schedule)
	s.Phases = slices.Clone(s.Phases)
	return &s
}

// ScheduleChange implements payments.Provider.
func (f *Fake) ScheduleChange(ctx context.Context, subscriptionID, scheduleID, newPriceID, key string) (*payments.Schedule, error) {
	if err := f.hold(ctx, OpScheduleChange); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fp := subscriptionID + "|" + scheduleID + "|" + newPriceID
	if r, err := f.begin(OpScheduleChange, key, true, fp); err != nil || r != nil {
		return cloneSchedule(r), err
	}
	sub, ok := f.subs[subscriptionID]
	if !ok {
		return nil, notFound("subscription", subscriptionID)
	}
	newPrice, ok := f.prices[newPriceID]
	if !ok {
		return nil, badRequest("No such price: '" + newPriceID + "'")
	}
	var sch *payments.Schedule
	if scheduleID == "" {
		if sub.ScheduleID != "" {
			return nil, badRequest("You cannot migrate a subscription that is already attached to a schedule: `" + sub.ScheduleID + "`.")
		}
		if sub.Status == "canceled" {
			return nil, badRequest("You cannot create a schedule from a canceled subscription.")
		}
		sch = &payments.Schedule{ID: f.newID("sub_sched"), SubscriptionID: sub.ID, Status: "active"}
		f.schedules[sch.ID] = sch
		sub.ScheduleID = sch.ID
	} else {
		sch, ok = f.schedules[scheduleID]
		if !ok || sch.Status != "active" {
			return nil, badRequest("No active schedule: '" + scheduleID + "'")
		}
	}
	cur := f.prices[sub.PriceID]
	sch.Phases = []payments.Phase{
		{PriceID: cur.ID, LookupKey: cur.LookupKey, Start: sub.CurrentPeriodStart, End: sub.CurrentPeriodEnd},
		{PriceID: newPrice.ID, LookupKey: newPrice.LookupKey, Start: sub.CurrentPeriodEnd, End: addInterval(sub.CurrentPeriodEnd, newPrice.LookupKey)},
	}
	f.remember(OpScheduleChange, key, fp, cloneSchedule(sch))
	return cloneSchedule(sch), nil
}

// ReleaseSchedule implements payments.Provider.
func (f *Fake) ReleaseSchedule(ctx context.Context, scheduleID, key string) error {
	if err := f.hold(ctx, OpReleaseSchedule); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, err := f.begin(OpReleaseSchedule, key, true, scheduleID); err != nil || r != nil {
		return err
	}
	sch, ok := f.schedules[scheduleID]
	if !ok {
		return notFound("subscription_schedule", scheduleID)
	}
	if sch.Status != "active" && sch.Status != "not_started" {
		return badRequest("You cannot release a subscription schedule that is currently in the `" + sch.Status + "` status.")
	}
	sch.Status = "released"
	if sub, ok := f.subs[sch.SubscriptionID]; ok && sub.ScheduleID == sch.ID {
		sub.ScheduleID = ""
	}
	f.remember(OpReleaseSchedule, key, scheduleID, "released")
	return nil
}

// GetInvoice implements payments.Provider.
func (f *Fake) GetInvoice(_ context.Context, id string) (*payments.Invoice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.begin(OpGetInvoice, "", false, ""); err != nil {
		return nil, err
	}
	inv, ok := f.invoices[id]
	if !ok {
		return nil, notFound("invoice", id)
	}
	return cloneInvoice(inv), nil
}

func cloneInvoice(inv *payments.Invoice) *payments.Invoice {
	c := *inv
	if inv.PaymentError != nil {
		e := *inv.PaymentError
		c.PaymentError = &e
	}
	if inv.FinalizationError != nil {
		e := *inv.FinalizationError
		c.FinalizationError = &e
	}
	return &c
}

func addInterval(t time.Time, lookupKey string) time.Time {
	if strings.HasSuffix(lookupKey, "_yearly") {
		return t.AddDate(1, 0, 0)
	}
	return t.AddDate(0, 1, 0)
}

// CompleteCheckout does what a customer paying on the checkout page does:
// it creates the subscription (active, or trialing with trialDays > 0) and
// its first invoice, paid.
func (f *Fake) CompleteCheckout(sessionID string, trialDays int) (payments.Subscription, payments.Invoice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[sessionID]
	if !ok {
		return payments.Subscription{}, payments.Invoice{}, notFound("checkout.session", sessionID)
	}
	if s.Status != "open" {
		return payments.Subscription{}, payments.Invoice{}, badRequest("checkout session is " + s.Status)
	}
	price := f.prices[f.sessPrice[sessionID]]
	now := f.now().UTC().Truncate(time.Second)
	sub := &payments.Subscription{
		ID: f.newID("sub"), CustomerID: s.CustomerID, Status: "active",
		PriceID: price.ID, LookupKey: price.LookupKey,
		CurrentPeriodStart: now, CurrentPeriodEnd: addInterval(now, price.LookupKey),
		Created: now,
	}
	if trialDays > 0 {
		sub.Status = "trialing"
		sub.TrialStart = now
		sub.TrialEnd = now.AddDate(0, 0, trialDays)
		sub.CurrentPeriodEnd = sub.TrialEnd
	}
	f.subs[sub.ID] = sub
	s.Status = "complete"
	s.SubscriptionID = sub.ID
	inv := f.newInvoice(sub, "subscription_create")
	inv.Status = "paid"
	inv.AttemptCount = 1
	if trialDays > 0 {
		inv.Total = 0
	}
	return *sub, *cloneInvoice(inv), nil
}

func (f *Fake) newInvoice(sub *payments.Subscription, reason string) *payments.Invoice {
	price := f.prices[sub.PriceID]
	// Invoices of one subscription are created a second apart at least, so
	// "newest first" has an order to show.
	created := f.now().UTC().Truncate(time.Second)
	for _, other := range f.invoices {
		if !other.Created.Before(created) {
			created = other.Created.Add(time.Second)
		}
	}
	inv := &payments.Invoice{
		ID: f.newID("in"), CustomerID: sub.CustomerID, SubscriptionID: sub.ID,
		Status: "draft", Currency: price.Currency, Total: price.UnitAmount,
		BillingReason: reason, HostedURL: "https://invoice.stripe.test/i/" + fmt.Sprint(f.seq),
		LookupKey: price.LookupKey, Created: created,
	}
	f.invoices[inv.ID] = inv
	return inv
}

// Renew ends the current period of a subscription as Stripe would at
// renewal: a canceled-at-period-end subscription ends (status canceled);
// otherwise a scheduled phase takes effect and a renewal invoice is created
// as a draft. The invoice is zero when the subscription ended.
func (f *Fake) Renew(subscriptionID string) (payments.Invoice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub, ok := f.subs[subscriptionID]
	if !ok {
		return payments.Invoice{}, notFound("subscription", subscriptionID)
	}
	if sub.CancelAtPeriodEnd {
		sub.Status = "canceled"
		return payments.Invoice{}, nil
	}
	start := sub.CurrentPeriodEnd
	if sch, ok := f.schedules[sub.ScheduleID]; ok && len(sch.Phases) > 1 {
		next := sch.Phases[1]
		sub.PriceID, sub.LookupKey = next.PriceID, next.LookupKey
		sch.Phases = sch.Phases[1:]
	}
	sub.CurrentPeriodStart = start
	sub.CurrentPeriodEnd = addInterval(start, sub.LookupKey)
	if sub.Status == "trialing" {
		sub.Status = "active"
	}
	return *cloneInvoice(f.newInvoice(sub, "subscription_cycle")), nil
}

// UpdateInvoice changes an invoice as Stripe's own processes would
// (finalize, pay, fail a payment or finalization, void) and returns it.
func (f *Fake) UpdateInvoice(id string, change func(*payments.Invoice)) (payments.Invoice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inv, ok := f.invoices[id]
	if !ok {
		return payments.Invoice{}, notFound("invoice", id)
	}
	change(inv)
	if sub, ok := f.subs[inv.SubscriptionID]; ok {
		switch {
		case inv.Status == "paid" && sub.Status == "past_due":
			sub.Status = "active"
		case inv.Status == "open" && inv.PaymentError != nil && sub.Status == "active":
			sub.Status = "past_due"
		}
	}
	return *cloneInvoice(inv), nil
}

// CreateInvoice makes a one-off draft invoice for a customer, as an
// operator does in Stripe's dashboard, and returns it.
func (f *Fake) CreateInvoice(customerID, currency string, total int64) (payments.Invoice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.customers[customerID]; !ok {
		return payments.Invoice{}, notFound("customer", customerID)
	}
	inv := &payments.Invoice{
		ID: f.newID("in"), CustomerID: customerID, Status: "draft", Currency: currency, Total: total,
		BillingReason: "manual", Created: f.now().UTC().Truncate(time.Second),
	}
	f.invoices[inv.ID] = inv
	return *cloneInvoice(inv), nil
}

// DeleteInvoice deletes an invoice as Stripe does: only a draft that does
// not belong to a subscription can be deleted, and it is gone for good.
func (f *Fake) DeleteInvoice(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	inv, ok := f.invoices[id]
	if !ok {
		return notFound("invoice", id)
	}
	if inv.Status != "draft" || inv.SubscriptionID != "" {
		return badRequest("You can only delete draft invoices that are not attached to a subscription.")
	}
	delete(f.invoices, id)
	return nil
}

// FailPayment records a failed payment attempt of an open invoice.
func FailPayment(errType, message string) func(*payments.Invoice) {
	return func(inv *payments.Invoice) {
		inv.Status = "open"
		inv.AttemptCount++
		inv.PaymentError = &payments.Error{Type: errType, Message: message}
	}
}

// SetSubscription changes a subscription as Stripe's own processes would
// (period ends, deletion) and returns it.
func (f *Fake) SetSubscription(id string, change func(*payments.Subscription)) (payments.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sub, ok := f.subs[id]
	if !ok {
		return payments.Subscription{}, notFound("subscription", id)
	}
	change(sub)
	return *sub, nil
}

// Event builds the JSON of a Stripe event about one object, as Stripe sends
// it (API version 2023-10-16). Billing re-fetches the object, so only its id
// and kind are in data.object.
func (f *Fake) Event(eventType, objectID string) []byte {
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("evt_fake%06d", f.seq)
	now := f.now().Unix()
	f.mu.Unlock()
	return EventJSON(id, eventType, objectID, now)
}

// EventJSON builds an event's JSON with a chosen id.
func EventJSON(id, eventType, objectID string, created int64) []byte {
	object := eventType
	if i := strings.LastIndexByte(eventType, '.'); i > 0 {
		object = eventType[:i]
	}
	if strings.HasPrefix(eventType, "customer.subscription.") {
		object = "subscription"
	}
	if strings.HasPrefix(eventType, "checkout.session.") {
		object = "checkout.session"
	}
	b, err := json.Marshal(map[string]any{
		"id":          id,
		"object":      "event",
		"api_version": stripe.APIVersion,
		"created":     created,
		"type":        eventType,
		"livemode":    false,
		"data":        map[string]any{"object": map[string]any{"id": objectID, "object": object}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// FinalizeInvoice turns a draft invoice open.
func FinalizeInvoice(inv *payments.Invoice) { inv.Status = "open" }

// PayInvoice records a successful payment.
func PayInvoice(inv *payments.Invoice) {
	inv.Status = "paid"
	inv.AttemptCount++
	inv.PaymentError = nil
}

// FailFinalization records a failed finalization.
func FailFinalization(message string) func(*payments.Invoice) {
	return func(inv *payments.Invoice) {
		inv.FinalizationError = &payments.Error{Type: "invalid_request_error", Message: message}
	}
}

// VoidInvoice voids an invoice.
func VoidInvoice(inv *payments.Invoice) { inv.Status = "void" }

// EndSubscription ends a subscription as Stripe's deletion does.
func EndSubscription(now time.Time) func(*payments.Subscription) {
	return func(s *payments.Subscription) {
		s.Status = "canceled"
		if s.CanceledAt.IsZero() {
			s.CanceledAt = now.UTC().Truncate(time.Second)
		}
	}
}

// MovePeriod shifts a subscription's current period by d (negative: into the
// past).
func MovePeriod(d time.Duration) func(*payments.Subscription) {
	return func(s *payments.Subscription) {
		s.CurrentPeriodStart = s.CurrentPeriodStart.Add(d)
		s.CurrentPeriodEnd = s.CurrentPeriodEnd.Add(d)
	}
}
