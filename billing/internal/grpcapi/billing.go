package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/switchboardhq/switchboard/billing/internal/account"
	"github.com/switchboardhq/switchboard/billing/internal/store"
	"github.com/switchboardhq/switchboard/billing/internal/webhook"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Paging limits of ListInvoices.
const (
	DefaultTake = 8
	MaxTake     = 100
)

// Intake stores webhook deliveries (webhook.Intake).
type Intake interface {
	Ingest(ctx context.Context, payload []byte, signature string) (webhook.Event, bool, error)
}

// Mutations are the flows that change a billing account: account.Service,
// or a decorator of it (idempotency.Service).
type Mutations interface {
	Checkout(ctx context.Context, u account.User, plan billingv1.Plan, recurring billingv1.Recurring, clientKey string) (string, error)
	Portal(ctx context.Context, u account.User, clientKey string) (string, error)
	Cancel(ctx context.Context, u account.User, clientKey string) (*billingv1.SubscriptionRecord, error)
	Resume(ctx context.Context, u account.User, clientKey string) (*billingv1.SubscriptionRecord, error)
	ChangeRecurring(ctx context.Context, u account.User, target billingv1.Recurring, clientKey string) (*billingv1.SubscriptionRecord, error)
}

var _ Mutations = (*account.Service)(nil)

// DeadLetters are the Stripe events the consumer set aside
// (webhook.DeadLetters).
type DeadLetters interface {
	List(ctx context.Context) ([]store.DeadLetter, error)
	Retry(ctx context.Context, key string) (string, error)
}

var _ DeadLetters = (*webhook.DeadLetters)(nil)

// Server implements billingv1.BillingServer. A nil account service means
// billing is not configured: every method answers BILLING_NOT_CONFIGURED.
type Server struct {
	billingv1.UnimplementedBillingServer
	acct   *account.Service
	mut    Mutations
	intake Intake
	dead   DeadLetters
	log    *slog.Logger
}

var _ billingv1.BillingServer = (*Server)(nil)

// NewServer returns the Billing service. The mutations go through mut, or
// straight to acct when mut is nil.
func NewServer(acct *account.Service, mut Mutations, intake Intake, dead DeadLetters, log *slog.Logger) *Server {
	if mut == nil && acct != nil {
		mut = acct
	}
	return &Server{acct: acct, mut: mut, intake: intake, dead: dead, log: log}
}

func (s *Server) ready() error {
	if s.acct == nil {
		return account.ErrNotConfigured
	}
	return nil
}

// user is the user a call acts for: the one the edge vouched for in the
// call's metadata (rpcauth.VouchedUser), never one a request body names. A
// body that names another user is refused; its email is ignored.
func (s *Server) user(ctx context.Context, body *billingv1.User) (account.User, error) {
	if err := s.ready(); err != nil {
		return account.User{}, err
	}
	u, err := rpcauth.VouchedUser(ctx)
	if err != nil {
		return account.User{}, account.ErrUnauthenticated
	}
	if id := body.GetId(); id != "" && id != u.ID {
		return account.User{}, errUserMismatch
	}
	return account.User{ID: u.ID, Email: u.Email}, nil
}

func subscription(rec *billingv1.SubscriptionRecord) *billingv1.Subscription {
	if rec == nil {
		return nil
	}
	return account.View(rec)
}

// Checkout implements billingv1.BillingServer.
func (s *Server) Checkout(ctx context.Context, req *billingv1.CheckoutRequest) (*billingv1.CheckoutResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "checkout", err)
	}
	url, err := s.mut.Checkout(ctx, u, req.GetPlan(), req.GetRecurring(), req.GetIdempotencyKey())
	if err != nil {
		return nil, toStatus(ctx, s.log, "checkout", err)
	}
	return &billingv1.CheckoutResponse{Url: url}, nil
}

// CreateCustomerPortal implements billingv1.BillingServer.
func (s *Server) CreateCustomerPortal(ctx context.Context, req *billingv1.CreateCustomerPortalRequest) (*billingv1.CreateCustomerPortalResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "portal", err)
	}
	url, err := s.mut.Portal(ctx, u, req.GetIdempotencyKey())
	if err != nil {
		return nil, toStatus(ctx, s.log, "portal", err)
	}
	return &billingv1.CreateCustomerPortalResponse{Url: url}, nil
}

// CancelSubscription implements billingv1.BillingServer.
func (s *Server) CancelSubscription(ctx context.Context, req *billingv1.CancelSubscriptionRequest) (*billingv1.CancelSubscriptionResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "cancel", err)
	}
	rec, err := s.mut.Cancel(ctx, u, req.GetIdempotencyKey())
	if err != nil {
		return nil, toStatus(ctx, s.log, "cancel", err)
	}
	return &billingv1.CancelSubscriptionResponse{Subscription: subscription(rec)}, nil
}

// ResumeSubscription implements billingv1.BillingServer.
func (s *Server) ResumeSubscription(ctx context.Context, req *billingv1.ResumeSubscriptionRequest) (*billingv1.ResumeSubscriptionResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "resume", err)
	}
	rec, err := s.mut.Resume(ctx, u, req.GetIdempotencyKey())
	if err != nil {
		return nil, toStatus(ctx, s.log, "resume", err)
	}
	return &billingv1.ResumeSubscriptionResponse{Subscription: subscription(rec)}, nil
}

// UpdateSubscriptionRecurring implements billingv1.BillingServer.
func (s *Server) UpdateSubscriptionRecurring(ctx context.Context, req *billingv1.UpdateSubscriptionRecurringRequest) (*billingv1.UpdateSubscriptionRecurringResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "update recurring", err)
	}
	rec, err := s.mut.ChangeRecurring(ctx, u, req.GetRecurring(), req.GetIdempotencyKey())
	if err != nil {
		return nil, toStatus(ctx, s.log, "update recurring", err)
	}
	return &billingv1.UpdateSubscriptionRecurringResponse{Subscription: subscription(rec)}, nil
}

// GetSubscription implements billingv1.BillingServer.
func (s *Server) GetSubscription(ctx context.Context, req *billingv1.GetSubscriptionRequest) (*billingv1.GetSubscriptionResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "get subscription", err)
	}
	return &billingv1.GetSubscriptionResponse{Subscription: subscription(s.acct.Current(u.ID))}, nil
}

// ListInvoices implements billingv1.BillingServer.
func (s *Server) ListInvoices(ctx context.Context, req *billingv1.ListInvoicesRequest) (*billingv1.ListInvoicesResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "list invoices", err)
	}
	take, skip := int(req.GetTake()), int(req.GetSkip())
	if take < 0 || take > MaxTake {
		return nil, toStatus(ctx, s.log, "list invoices", badParam("take", "take must be between 1 and 100"))
	}
	if skip < 0 {
		return nil, toStatus(ctx, s.log, "list invoices", badParam("skip", "skip must not be negative"))
	}
	if take == 0 {
		take = DefaultTake
	}
	invoices, total := s.acct.Invoices(u.ID, take, skip)
	return &billingv1.ListInvoicesResponse{Invoices: invoices, Total: int32(total)}, nil
}

// CountInvoices implements billingv1.BillingServer.
func (s *Server) CountInvoices(ctx context.Context, req *billingv1.CountInvoicesRequest) (*billingv1.CountInvoicesResponse, error) {
	u, err := s.user(ctx, req.GetUser())
	if err != nil {
		return nil, toStatus(ctx, s.log, "count invoices", err)
	}
	_, total := s.acct.Invoices(u.ID, 0, 0)
	return &billingv1.CountInvoicesResponse{Count: int32(total)}, nil
}

// ListPrices implements billingv1.BillingServer.
func (s *Server) ListPrices(ctx context.Context, _ *billingv1.ListPricesRequest) (*billingv1.ListPricesResponse, error) {
	if err := s.ready(); err != nil {
		return nil, toStatus(ctx, s.log, "list prices", err)
	}
	prices, err := s.acct.Prices(ctx)
	if err != nil {
		return nil, toStatus(ctx, s.log, "list prices", err)
	}
	return &billingv1.ListPricesResponse{Prices: prices}, nil
}

// IngestWebhook implements billingv1.BillingServer.
func (s *Server) IngestWebhook(ctx context.Context, req *billingv1.IngestWebhookRequest) (*billingv1.IngestWebhookResponse, error) {
	if err := s.ready(); err != nil {
		return nil, toStatus(ctx, s.log, "ingest webhook", err)
	}
	// Stripe waits for the answer; the bus must acknowledge well within it.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ev, dup, err := s.intake.Ingest(ctx, req.GetPayload(), req.GetSignature())
	switch {
	case err == nil:
		return &billingv1.IngestWebhookResponse{EventId: ev.ID, EventType: ev.Type, Duplicate: dup}, nil
	case errors.Is(err, webhook.ErrNotConfigured), errors.Is(err, webhook.ErrBadSignature),
		errors.Is(err, webhook.ErrStale), errors.Is(err, webhook.ErrAPIVersion), errors.Is(err, webhook.ErrMalformed):
		return nil, toStatus(ctx, s.log, "ingest webhook", err)
	}
	// Not stored: Stripe must see a failure and deliver again.
	s.log.Error("stripe event not stored", "err", err)
	return nil, statusError(codes.Unavailable, CodeEventNotStored, "the event could not be stored, retry", http.StatusServiceUnavailable)
}
