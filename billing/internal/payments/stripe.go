package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	billingportalsession "github.com/stripe/stripe-go/v76/billingportal/session"
	checkoutsession "github.com/stripe/stripe-go/v76/checkout/session"
	"github.com/stripe/stripe-go/v76/customer"
	"github.com/stripe/stripe-go/v76/invoice"
	"github.com/stripe/stripe-go/v76/price"
	"github.com/stripe/stripe-go/v76/subscription"
	"github.com/stripe/stripe-go/v76/subscriptionschedule"
)

// StripeConfig configures the Stripe client.
type StripeConfig struct {
	// SecretKey is the API key (sk_...).
	SecretKey string
	// APIBase replaces https://api.stripe.com (stripe-mock, a proxy).
	APIBase string
	// Timeout bounds each HTTP call; 0 means 30 seconds.
	Timeout time.Duration
	// MaxNetworkRetries is how often stripe-go retries a failed call (with
	// the same idempotency key); 0 means 2.
	MaxNetworkRetries int64
	Logger            *slog.Logger
}

// Stripe is the Provider backed by the Stripe API through stripe-go, with a
// client of its own (never the global stripe.Key).
type Stripe struct {
	api *stripeAPI
}

// stripeAPI holds the clients of the Stripe resources billing uses, named
// as on stripe-go's client.API, which would link all of Stripe's (over a
// hundred packages, each initialised at start) into every process.
type stripeAPI struct {
	Customers             *customer.Client
	Prices                *price.Client
	CheckoutSessions      *checkoutsession.Client
	BillingPortalSessions *billingportalsession.Client
	Subscriptions         *subscription.Client
	SubscriptionSchedules *subscriptionschedule.Client
	Invoices              *invoice.Client
}

var _ Provider = (*Stripe)(nil)

// NewStripe builds a Stripe client from cfg.
func NewStripe(cfg StripeConfig) (*Stripe, error) {
	if cfg.SecretKey == "" {
		return nil, errors.New("payments: stripe secret key is empty")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxNetworkRetries <= 0 {
		cfg.MaxNetworkRetries = 2
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	httpClient := &http.Client{Timeout: cfg.Timeout}
	backend := func(kind stripe.SupportedBackend, url string) stripe.Backend {
		bc := &stripe.BackendConfig{
			HTTPClient:        httpClient,
			MaxNetworkRetries: stripe.Int64(cfg.MaxNetworkRetries),
			LeveledLogger:     slogLogger{logger.With("component", "stripe")},
		}
		if url != "" {
			bc.URL = stripe.String(url)
		}
		return stripe.GetBackendWithConfig(kind, bc)
	}
	b, key := backend(stripe.APIBackend, strings.TrimSuffix(cfg.APIBase, "/")), cfg.SecretKey
	return &Stripe{api: &stripeAPI{
		Customers:             &customer.Client{B: b, Key: key},
		Prices:                &price.Client{B: b, Key: key},
		CheckoutSessions:      &checkoutsession.Client{B: b, Key: key},
		BillingPortalSessions: &billingportalsession.Client{B: b, Key: key},
		Subscriptions:         &subscription.Client{B: b, Key: key},
		SubscriptionSchedules: &subscriptionschedule.Client{B: b, Key: key},
		Invoices:              &invoice.Client{B: b, Key: key},
	}}, nil
}

func params(ctx context.Context, idempotencyKey string) stripe.Params {
	p := stripe.Params{Context: ctx}
	if idempotencyKey != "" {
		p.SetIdempotencyKey(idempotencyKey)
	}
	return p
}

// CreateCustomer implements Customers.
func (s *Stripe) CreateCustomer(ctx context.Context, userID, email, idempotencyKey string) (*Customer, error) {
	p := &stripe.CustomerParams{Params: params(ctx, idempotencyKey)}
	if email != "" {
		p.Email = stripe.String(email)
	}
	p.AddMetadata("user_id", userID)
	c, err := s.api.Customers.New(p)
	if err != nil {
		return nil, convertError(err)
	}
	return customerFrom(c), nil
}

// GetCustomer implements Customers.
func (s *Stripe) GetCustomer(ctx context.Context, id string) (*Customer, error) {
	c, err := s.api.Customers.Get(id, &stripe.CustomerParams{Params: params(ctx, "")})
	if err != nil {
		return nil, convertError(err)
	}
	return customerFrom(c), nil
}

func customerFrom(c *stripe.Customer) *Customer {
	return &Customer{ID: c.ID, Email: c.Email, UserID: c.Metadata["user_id"]}
}

// ListPrices implements Checkout.
func (s *Stripe) ListPrices(ctx context.Context, lookupKeys []string) ([]Price, error) {
	p := &stripe.PriceListParams{Active: stripe.Bool(true)}
	p.Context = ctx
	p.LookupKeys = stripe.StringSlice(lookupKeys)
	it := s.api.Prices.List(p)
	var out []Price
	for it.Next() {
		pr := it.Price()
		out = append(out, Price{ID: pr.ID, LookupKey: pr.LookupKey, Currency: string(pr.Currency), UnitAmount: pr.UnitAmount})
	}
	if err := it.Err(); err != nil {
		return nil, convertError(err)
	}
	return out, nil
}

// CreateCheckoutSession implements Checkout.
func (s *Stripe) CreateCheckoutSession(ctx context.Context, cp CheckoutParams, idempotencyKey string) (*CheckoutSession, error) {
	p := &stripe.CheckoutSessionParams{
		Params:            params(ctx, idempotencyKey),
		Mode:              stripe.String(string(stripe.CheckoutSessionModeSubscription)),
		Customer:          stripe.String(cp.CustomerID),
		ClientReferenceID: stripe.String(cp.UserID),
		LineItems: []*stripe.CheckoutSessionLineItemParams{
			{Price: stripe.String(cp.PriceID), Quantity: stripe.Int64(1)},
		},
		SuccessURL:          stripe.String(cp.SuccessURL),
		CancelURL:           stripe.String(cp.CancelURL),
		AllowPromotionCodes: stripe.Bool(true),
		CustomerUpdate: &stripe.CheckoutSessionCustomerUpdateParams{
			Address: stripe.String("auto"),
			Name:    stripe.String("auto"),
		},
		TaxIDCollection: &stripe.CheckoutSessionTaxIDCollectionParams{Enabled: stripe.Bool(true)},
		SubscriptionData: &stripe.CheckoutSessionSubscriptionDataParams{
			Metadata: map[string]string{"user_id": cp.UserID},
		},
	}
	if cp.CheckoutKey != "" {
		p.AddMetadata(checkoutKeyField, cp.CheckoutKey)
	}
	p.AddMetadata(priceIDField, cp.PriceID)
	cs, err := s.api.CheckoutSessions.New(p)
	if err != nil {
		return nil, convertError(err)
	}
	return checkoutFrom(cs), nil
}

// GetCheckoutSession implements Checkout.
func (s *Stripe) GetCheckoutSession(ctx context.Context, id string) (*CheckoutSession, error) {
	cs, err := s.api.CheckoutSessions.Get(id, &stripe.CheckoutSessionParams{Params: params(ctx, "")})
	if err != nil {
		return nil, convertError(err)
	}
	return checkoutFrom(cs), nil
}

// ListOpenCheckoutSessions implements Checkout.
func (s *Stripe) ListOpenCheckoutSessions(ctx context.Context, customerID string) ([]CheckoutSession, error) {
	p := &stripe.CheckoutSessionListParams{
		Customer: stripe.String(customerID),
		Status:   stripe.String(string(stripe.CheckoutSessionStatusOpen)),
	}
	p.Context = ctx
	p.Limit = stripe.Int64(100)
	it := s.api.CheckoutSessions.List(p)
	var out []CheckoutSession
	for it.Next() {
		out = append(out, *checkoutFrom(it.CheckoutSession()))
	}
	if err := it.Err(); err != nil {
		return nil, convertError(err)
	}
	return out, nil
}

// FindCheckoutSession implements Checkout. Stripe cannot filter sessions
// by metadata: the customer's sessions are read newest first until one
// carries checkoutKey.
func (s *Stripe) FindCheckoutSession(ctx context.Context, customerID, checkoutKey string) (*CheckoutSession, error) {
	p := &stripe.CheckoutSessionListParams{Customer: stripe.String(customerID)}
	p.Context = ctx
	p.Limit = stripe.Int64(100)
	it := s.api.CheckoutSessions.List(p)
	for it.Next() {
		if cs := it.CheckoutSession(); checkoutKey != "" && cs.Metadata[checkoutKeyField] == checkoutKey {
			return checkoutFrom(cs), nil
		}
	}
	if err := it.Err(); err != nil {
		return nil, convertError(err)
	}
	return nil, fmt.Errorf("%w: no checkout session with this checkout key", ErrNotFound)
}

// ExpireCheckoutSession implements Checkout.
func (s *Stripe) ExpireCheckoutSession(ctx context.Context, id, idempotencyKey string) error {
	_, err := s.api.CheckoutSessions.Expire(id, &stripe.CheckoutSessionExpireParams{Params: params(ctx, idempotencyKey)})
	return convertError(err)
}

// Metadata fields of the checkout sessions billing creates:
// CheckoutParams.CheckoutKey and CheckoutParams.PriceID.
const (
	checkoutKeyField = "checkout_key"
	priceIDField     = "price_id"
)

func checkoutFrom(cs *stripe.CheckoutSession) *CheckoutSession {
	out := &CheckoutSession{
		ID: cs.ID, URL: cs.URL, ClientReferenceID: cs.ClientReferenceID,
		Status: string(cs.Status), Mode: string(cs.Mode), CheckoutKey: cs.Metadata[checkoutKeyField],
		PriceID: cs.Metadata[priceIDField],
	}
	if cs.Customer != nil {
		out.CustomerID = cs.Customer.ID
	}
	if cs.Subscription != nil {
		out.SubscriptionID = cs.Subscription.ID
	}
	return out
}

// CreatePortalSession implements Customers.
func (s *Stripe) CreatePortalSession(ctx context.Context, customerID, returnURL, idempotencyKey string) (string, error) {
	p := &stripe.BillingPortalSessionParams{
		Params:    params(ctx, idempotencyKey),
		Customer:  stripe.String(customerID),
		ReturnURL: stripe.String(returnURL),
	}
	ps, err := s.api.BillingPortalSessions.New(p)
	if err != nil {
		return "", convertError(err)
	}
	return ps.URL, nil
}

// GetSubscription implements Subscriptions.
func (s *Stripe) GetSubscription(ctx context.Context, id string) (*Subscription, error) {
	sub, err := s.api.Subscriptions.Get(id, &stripe.SubscriptionParams{Params: params(ctx, "")})
	if err != nil {
		return nil, convertError(err)
	}
	return subscriptionFrom(sub), nil
}

// ListSubscriptions implements Subscriptions.
func (s *Stripe) ListSubscriptions(ctx context.Context, customerID string) ([]Subscription, error) {
	p := &stripe.SubscriptionListParams{Customer: stripe.String(customerID), Status: stripe.String("all")}
	p.Context = ctx
	p.Limit = stripe.Int64(100)
	it := s.api.Subscriptions.List(p)
	var out []Subscription
	for it.Next() {
		out = append(out, *subscriptionFrom(it.Subscription()))
	}
	if err := it.Err(); err != nil {
		return nil, convertError(err)
	}
	return out, nil
}

// SetCancelAtPeriodEnd implements Subscriptions.
func (s *Stripe) SetCancelAtPeriodEnd(ctx context.Context, id string, cancel bool, idempotencyKey string) (*Subscription, error) {
	sub, err := s.api.Subscriptions.Update(id, &stripe.SubscriptionParams{
		Params:            params(ctx, idempotencyKey),
		CancelAtPeriodEnd: stripe.Bool(cancel),
	})
	if err != nil {
		return nil, convertError(err)
	}
	return subscriptionFrom(sub), nil
}

func subscriptionFrom(sub *stripe.Subscription) *Subscription {
	out := &Subscription{
		ID:                 sub.ID,
		Status:             string(sub.Status),
		CurrentPeriodStart: unix(sub.CurrentPeriodStart),
		CurrentPeriodEnd:   unix(sub.CurrentPeriodEnd),
		TrialStart:         unix(sub.TrialStart),
		TrialEnd:           unix(sub.TrialEnd),
		CanceledAt:         unix(sub.CanceledAt),
		CancelAtPeriodEnd:  sub.CancelAtPeriodEnd,
		Created:            unix(sub.Created),
	}
	if sub.Customer != nil {
		out.CustomerID = sub.Customer.ID
	}
	if sub.Schedule != nil {
		out.ScheduleID = sub.Schedule.ID
	}
	if sub.Items != nil && len(sub.Items.Data) > 0 && sub.Items.Data[0].Price != nil {
		out.PriceID = sub.Items.Data[0].Price.ID
		out.LookupKey = sub.Items.Data[0].Price.LookupKey
	}
	return out
}

// GetSchedule implements Schedules.
func (s *Stripe) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	p := &stripe.SubscriptionScheduleParams{Params: params(ctx, "")}
	p.AddExpand("phases.items.price")
	sch, err := s.api.SubscriptionSchedules.Get(id, p)
	if err != nil {
		return nil, convertError(err)
	}
	return scheduleFrom(sch), nil
}

// ScheduleChange implements Schedules: a schedule whose first phase is
// the current price until the period ends and whose second phase is the new
// price, released afterwards, nothing prorated.
func (s *Stripe) ScheduleChange(ctx context.Context, subscriptionID, scheduleID, newPriceID, idempotencyKey string) (*Schedule, error) {
	var sch *stripe.SubscriptionSchedule
	var err error
	if scheduleID == "" {
		sch, err = s.api.SubscriptionSchedules.New(&stripe.SubscriptionScheduleParams{
			Params:           params(ctx, idempotencyKey+"/create"),
			FromSubscription: stripe.String(subscriptionID),
		})
	} else {
		sch, err = s.api.SubscriptionSchedules.Get(scheduleID, &stripe.SubscriptionScheduleParams{Params: params(ctx, "")})
	}
	if err != nil {
		return nil, convertError(err)
	}
	var current *stripe.SubscriptionSchedulePhase
	if len(sch.Phases) > 0 {
		current = sch.Phases[0]
		if sch.CurrentPhase != nil {
			for _, ph := range sch.Phases {
				if ph.StartDate == sch.CurrentPhase.StartDate {
					current = ph
				}
			}
		}
	}
	if current == nil || len(current.Items) == 0 || current.Items[0].Price == nil {
		return nil, &APIError{Message: "subscription schedule has no current phase"}
	}
	// Stripe replaces every phase and keeps nothing a phase does not send
	// again: the current phase's trial and discounts go with it, and the new
	// cycle's phase reuses the discounts the subscription holds (a phase
	// naming none only inherits the customer's).
	phases := []*stripe.SubscriptionSchedulePhaseParams{
		{
			Items: []*stripe.SubscriptionSchedulePhaseItemParams{
				{Price: stripe.String(current.Items[0].Price.ID), Quantity: stripe.Int64(1)},
			},
			StartDate: stripe.Int64(current.StartDate),
			EndDate:   stripe.Int64(current.EndDate),
			Discounts: phaseDiscounts(current),
		},
		{
			Items: []*stripe.SubscriptionSchedulePhaseItemParams{
				{Price: stripe.String(newPriceID), Quantity: stripe.Int64(1)},
			},
			Iterations: stripe.Int64(1),
			Discounts:  heldDiscounts(current),
		},
	}
	if current.TrialEnd != 0 {
		phases[0].TrialEnd = stripe.Int64(current.TrialEnd)
	}
	up := &stripe.SubscriptionScheduleParams{
		Params:            params(ctx, idempotencyKey+"/phases"),
		Phases:            phases,
		EndBehavior:       stripe.String(string(stripe.SubscriptionScheduleEndBehaviorRelease)),
		ProrationBehavior: stripe.String("none"),
	}
	up.AddExpand("phases.items.price")
	sch, err = s.api.SubscriptionSchedules.Update(sch.ID, up)
	if err != nil {
		return nil, convertError(err)
	}
	return scheduleFrom(sch), nil
}

// phaseDiscounts are the discounts of ph as phase parameters: each discount
// it holds is reused (not created anew from its coupon, which would restart
// a coupon that lasts some months), a promotion code or coupon redeemed
// again only where no discount is named; a phase with only the legacy coupon
// field has that coupon. Nil when it has none.
func phaseDiscounts(ph *stripe.SubscriptionSchedulePhase) []*stripe.SubscriptionSchedulePhaseDiscountParams {
	var out []*stripe.SubscriptionSchedulePhaseDiscountParams
	for _, d := range ph.Discounts {
		switch {
		case d == nil:
		case d.Discount != nil && d.Discount.ID != "":
			out = append(out, &stripe.SubscriptionSchedulePhaseDiscountParams{Discount: stripe.String(d.Discount.ID)})
		case d.PromotionCode != nil && d.PromotionCode.ID != "":
			out = append(out, &stripe.SubscriptionSchedulePhaseDiscountParams{PromotionCode: stripe.String(d.PromotionCode.ID)})
		case d.Coupon != nil && d.Coupon.ID != "":
			out = append(out, &stripe.SubscriptionSchedulePhaseDiscountParams{Coupon: stripe.String(d.Coupon.ID)})
		}
	}
	if len(out) == 0 && ph.Coupon != nil && ph.Coupon.ID != "" {
		out = append(out, &stripe.SubscriptionSchedulePhaseDiscountParams{Coupon: stripe.String(ph.Coupon.ID)})
	}
	return out
}

// heldDiscounts are the discounts ph holds, to reuse in a later phase: each
// ends when it would have (a coupon that lasts some months is not started
// over, as redeeming its coupon or promotion code again would). Nil when
// ph holds none.
func heldDiscounts(ph *stripe.SubscriptionSchedulePhase) []*stripe.SubscriptionSchedulePhaseDiscountParams {
	var out []*stripe.SubscriptionSchedulePhaseDiscountParams
	for _, d := range ph.Discounts {
		if d != nil && d.Discount != nil && d.Discount.ID != "" {
			out = append(out, &stripe.SubscriptionSchedulePhaseDiscountParams{Discount: stripe.String(d.Discount.ID)})
		}
	}
	return out
}

// ReleaseSchedule implements Schedules.
func (s *Stripe) ReleaseSchedule(ctx context.Context, scheduleID, idempotencyKey string) error {
	_, err := s.api.SubscriptionSchedules.Release(scheduleID, &stripe.SubscriptionScheduleReleaseParams{
		Params: params(ctx, idempotencyKey),
	})
	return convertError(err)
}

func scheduleFrom(sch *stripe.SubscriptionSchedule) *Schedule {
	out := &Schedule{ID: sch.ID, Status: string(sch.Status)}
	if sch.Subscription != nil {
		out.SubscriptionID = sch.Subscription.ID
	}
	for _, ph := range sch.Phases {
		p := Phase{Start: unix(ph.StartDate), End: unix(ph.EndDate)}
		if len(ph.Items) > 0 && ph.Items[0].Price != nil {
			p.PriceID = ph.Items[0].Price.ID
			p.LookupKey = ph.Items[0].Price.LookupKey
		}
		out.Phases = append(out.Phases, p)
	}
	return out
}

// GetInvoice implements Invoices.
func (s *Stripe) GetInvoice(ctx context.Context, id string) (*Invoice, error) {
	p := &stripe.InvoiceParams{Params: params(ctx, "")}
	p.AddExpand("payment_intent")
	inv, err := s.api.Invoices.Get(id, p)
	if err != nil {
		return nil, convertError(err)
	}
	out := &Invoice{
		ID:            inv.ID,
		Status:        string(inv.Status),
		Currency:      string(inv.Currency),
		Total:         inv.Total,
		BillingReason: string(inv.BillingReason),
		HostedURL:     inv.HostedInvoiceURL,
		AttemptCount:  inv.AttemptCount,
		Created:       unix(inv.Created),
	}
	if inv.Customer != nil {
		out.CustomerID = inv.Customer.ID
	}
	if inv.Subscription != nil {
		out.SubscriptionID = inv.Subscription.ID
	}
	if inv.Lines != nil {
		for _, l := range inv.Lines.Data {
			if l.Price != nil && l.Price.LookupKey != "" {
				out.LookupKey = l.Price.LookupKey
				break
			}
		}
	}
	if inv.PaymentIntent != nil && inv.PaymentIntent.LastPaymentError != nil {
		e := inv.PaymentIntent.LastPaymentError
		out.PaymentError = &Error{Type: string(e.Type), Message: e.Msg}
	}
	if inv.LastFinalizationError != nil {
		e := inv.LastFinalizationError
		out.FinalizationError = &Error{Type: string(e.Type), Message: e.Msg}
	}
	return out, nil
}

func unix(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

// convertError turns stripe-go errors into ErrNotFound or *APIError, with
// nothing of an answer's body but a Stripe error's message.
func convertError(err error) error {
	if err == nil {
		return nil
	}
	var se *stripe.Error
	if errors.As(err, &se) {
		if se.HTTPStatusCode == http.StatusNotFound || se.Code == stripe.ErrorCodeResourceMissing {
			return fmt.Errorf("%w: %s", ErrNotFound, se.Msg)
		}
		return &APIError{Status: se.HTTPStatusCode, Type: string(se.Type), Code: string(se.Code), Message: se.Msg}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &APIError{Message: transportError(err)}
	}
	msg := err.Error()
	if json.Valid([]byte(msg)) || strings.HasPrefix(msg, "Couldn't deserialize JSON") {
		// stripe-go's error for an answer it could not read as Stripe's:
		// the body itself (JSON without an error object), or a sample of
		// it. Not for a log.
		msg = "stripe answered neither an object nor a Stripe error"
	}
	return &APIError{Message: msg}
}

// slogLogger adapts slog to stripe-go's leveled logger. It keeps of what
// stripe-go logs only what tells a call and how it ended (method, host and
// path, duration, retries, and for an error its status, type, code and
// Stripe's request id), never a request's or an answer's body, at any
// level: stripe-go logs every answer whole at debug (a customer, a
// subscription, a Checkout or portal session with its URL, which acts as
// the customer on Stripe's hosted pages), an error's whole object, and a
// sample of a body it could not read.
type slogLogger struct{ log *slog.Logger }

func (l slogLogger) Debugf(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
func (l slogLogger) Infof(format string, v ...any)  { l.logf(slog.LevelDebug, format, v) }
func (l slogLogger) Warnf(format string, v ...any)  { l.logf(slog.LevelWarn, format, v) }
func (l slogLogger) Errorf(format string, v ...any) { l.logf(slog.LevelWarn, format, v) }

// logf logs one of stripe-go's lines by its format: those whose arguments
// are the call's method, host, path, timings and retries as they are, an
// error as what it is without its body, an answer's body not at all, and a
// line this list does not know with the words of its format alone, its
// arguments (which may hold a body) left out.
func (l slogLogger) logf(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	switch format {
	case "Requesting %v %v%v",
		"Request completed in %v (retry: %v)",
		"Not retrying request: %v",
		"Initiating retry %v for request %v %v%v after sleeping %v":
		l.log.Log(ctx, level, fmt.Sprintf(format, v...))
	case "Response: %s":
		// The answer's body.
	case "Request error from Stripe (status %v): %v",
		"User-compelled request error from Stripe (status %v): %v":
		msg, _, _ := strings.Cut(format, " (")
		var attrs []any
		if len(v) == 2 {
			attrs = append(attrs, "status", v[0])
			if se, ok := v[1].(*stripe.Error); ok {
				attrs = append(attrs, "type", string(se.Type), "code", string(se.Code), "request_id", se.RequestID)
			}
		}
		l.log.Log(ctx, level, msg, attrs...)
	case "Request failed with error: %v", "Cannot create Stripe request: %v":
		// A transport error: its URL without the query (a list's
		// filters, a customer's email).
		msg, _, _ := strings.Cut(format, ":")
		if err, ok := single(v).(error); ok {
			l.log.Log(ctx, level, msg, "error", transportError(err))
		} else {
			l.log.Log(ctx, level, msg)
		}
	case "%s":
		// A body stripe-go could not read, with a sample of it.
		var status int
		if s, ok := single(v).(string); ok {
			_, _ = fmt.Sscanf(s, "Couldn't deserialize JSON (response status: %d", &status)
		}
		l.log.Log(ctx, level, "Couldn't deserialize JSON from Stripe", "status", status)
	default:
		// "Error decoding error from Stripe: %v" (its error is the body
		// itself when the answer held no error object), and any other.
		msg, _, _ := strings.Cut(format, ": %")
		l.log.Log(ctx, level, msg)
	}
}

// single is v's only value, or nil.
func single(v []any) any {
	if len(v) != 1 {
		return nil
	}
	return v[0]
}

// transportError is err's text with the query of the URL it names left out.
func transportError(err error) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err.Error()
	}
	where := ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil {
		u.RawQuery, u.Fragment, u.User = "", "", nil
		where = u.String()
	} else {
		where, _, _ = strings.Cut(where, "?")
	}
	return fmt.Sprintf("%s %q: %v", ue.Op, where, ue.Err)
}
