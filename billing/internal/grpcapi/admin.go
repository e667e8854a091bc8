package grpcapi

import (
	"context"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/billing/internal/account"
	"github.com/switchboardhq/switchboard/billing/internal/store"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Paging of the operator lists.
const DefaultAdminTake = 20

// maxErrorText bounds a dead letter's error as shown.
const maxErrorText = 1000

// CodeAdminRequired: an operator method was called without the edge saying
// the caller is an admin, or on behalf of a user.
const CodeAdminRequired = "ADMIN_REQUIRED"

var (
	errAdminRequired = &account.Error{Code: CodeAdminRequired, Status: http.StatusForbidden,
		Message: "this method is for operators: the admin token is required, and no user may be named"}
	errNoDeadLetter = &account.Error{Code: "DEAD_LETTER_NOT_FOUND", Status: http.StatusNotFound,
		Message: "no dead-lettered event has this id"}
)

// admin admits an operator's call (rpcauth.VouchedAdmin), then needs
// billing to be configured.
func (s *Server) admin(ctx context.Context) error {
	if rpcauth.VouchedAdmin(ctx) != nil {
		return errAdminRequired
	}
	return s.ready()
}

// page checks a take and skip; take 0 is the default.
func page(take, skip int32) (int, int, error) {
	if take < 0 || take > MaxTake {
		return 0, 0, badParam("take", "take must be between 1 and 100")
	}
	if skip < 0 {
		return 0, 0, badParam("skip", "skip must not be negative")
	}
	if take == 0 {
		take = DefaultAdminTake
	}
	return int(take), int(skip), nil
}

// ListSubscriptions implements billingv1.BillingServer.
func (s *Server) ListSubscriptions(ctx context.Context, req *billingv1.ListSubscriptionsRequest) (*billingv1.ListSubscriptionsResponse, error) {
	if err := s.admin(ctx); err != nil {
		return nil, toStatus(ctx, s.log, "list subscriptions", err)
	}
	take, skip, err := page(req.GetTake(), req.GetSkip())
	if err != nil {
		return nil, toStatus(ctx, s.log, "list subscriptions", err)
	}
	recs, total := s.acct.AllSubscriptions(take, skip)
	out := make([]*billingv1.UserSubscription, len(recs))
	for i, r := range recs {
		out[i] = &billingv1.UserSubscription{UserId: r.GetUserId(), Subscription: account.View(r), CancelAtPeriodEnd: r.GetCancelAtPeriodEnd()}
	}
	return &billingv1.ListSubscriptionsResponse{Subscriptions: out, Total: int32(total)}, nil
}

// ListDeadEvents implements billingv1.BillingServer.
func (s *Server) ListDeadEvents(ctx context.Context, req *billingv1.ListDeadEventsRequest) (*billingv1.ListDeadEventsResponse, error) {
	if err := s.admin(ctx); err != nil {
		return nil, toStatus(ctx, s.log, "list dead events", err)
	}
	take, skip, err := page(req.GetTake(), req.GetSkip())
	if err != nil {
		return nil, toStatus(ctx, s.log, "list dead events", err)
	}
	all, err := s.dead.List(ctx)
	if err != nil {
		return nil, toStatus(ctx, s.log, "list dead events", err)
	}
	total := len(all)
	all = all[min(skip, total):]
	all = all[:min(take, len(all))]
	out := make([]*billingv1.DeadLetter, len(all))
	for i, d := range all {
		out[i] = &billingv1.DeadLetter{
			Id: d.Key, EventId: d.Event.GetEventId(), Type: d.Event.GetType(), FailedAt: d.Event.GetFailedAt(),
			Attempts: d.Event.GetDeliveries(), LastError: truncate(d.Event.GetError(), maxErrorText),
		}
	}
	return &billingv1.ListDeadEventsResponse{Events: out, Total: int32(total)}, nil
}

// RetryDeadEvent implements billingv1.BillingServer.
func (s *Server) RetryDeadEvent(ctx context.Context, req *billingv1.RetryDeadEventRequest) (*billingv1.RetryDeadEventResponse, error) {
	if err := s.admin(ctx); err != nil {
		return nil, toStatus(ctx, s.log, "retry dead event", err)
	}
	id, err := s.dead.Retry(ctx, req.GetId())
	if errors.Is(err, store.ErrNoDeadLetter) {
		err = errNoDeadLetter
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, "retry dead event", err)
	}
	s.log.Info("dead-lettered stripe event retried by an operator", "event", id)
	return &billingv1.RetryDeadEventResponse{EventId: id}, nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
