package edge

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/edge/internal/graphql"
	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// The console's billing routes, for operators (admin token).
const (
	billingSubscriptionsPath = "/api/billing/subscriptions"
	billingDeadLettersPath   = "/api/billing/dead-letters"
)

// billingAdminTimeout bounds one call to billing.
const billingAdminTimeout = 15 * time.Second

// Codes of the billing admin routes' own errors, in the snake_case of
// every /api route (GraphQL names them in upper case).
const (
	codeBillingNotConfigured = "billing_not_configured"
	codeBillingUnavailable   = "billing_unavailable"
)

// mountBillingAdmin serves the operator's billing routes: every user's
// subscriptions, the dead-lettered Stripe events and their retry, through
// billing's gRPC service on conn (nil: billing is not part of this
// deployment, and the routes say it is not configured). They need the admin
// token, and billing hears of them as an admin's calls acting for no user.
func mountBillingAdmin(mux mounter, conn grpc.ClientConnInterface, adminToken string, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &billingAdmin{log: log}
	if conn != nil {
		a.client = billingv1.NewBillingClient(conn)
	}
	guard := func(h http.HandlerFunc) http.Handler {
		return telemetry.AdminOnly(adminToken, h, func(w http.ResponseWriter) {
			openai.NewProblem(http.StatusUnauthorized, "invalid_admin_token", "a valid admin token is required (Authorization: Bearer <admin token>)", "").Write(w)
		})
	}
	mux.Handle("GET "+billingSubscriptionsPath, guard(a.subscriptions))
	mux.Handle("GET "+billingDeadLettersPath, guard(a.deadLetters))
	mux.Handle("POST "+billingDeadLettersPath+"/{id}/retry", guard(a.retry))
}

type billingAdmin struct {
	client billingv1.BillingClient
	log    *slog.Logger
}

// call prepares a call to billing: nil when billing is not part of the
// deployment (the answer is written).
func (a *billingAdmin) call(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	if a.client == nil {
		openai.NewProblem(http.StatusServiceUnavailable, codeBillingNotConfigured, "billing is not configured on this gateway (no billing role or BILLING_ADDR)", "").Write(w)
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), billingAdminTimeout)
	return rpcauth.VouchAdmin(ctx), cancel, true
}

// paging reads take and skip (both optional) from the query.
func paging(w http.ResponseWriter, r *http.Request) (take, skip int32, ok bool) {
	vals := [2]int32{}
	for i, name := range []string{"take", "skip"} {
		raw := r.URL.Query().Get(name)
		if raw == "" {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 32)
		if err != nil || n < 0 {
			openai.NewProblem(http.StatusBadRequest, "invalid_value", name+" must be a whole number, 0 or more", name).Write(w)
			return 0, 0, false
		}
		vals[i] = int32(n)
	}
	return vals[0], vals[1], true
}

// listPage reads a list route's paging, calls billing with it and answers
// a failure; ok is false when the answer was written already.
func listPage[R any](a *billingAdmin, w http.ResponseWriter, r *http.Request, op string, list func(ctx context.Context, take, skip int32) (R, error)) (resp R, ok bool) {
	take, skip, ok := paging(w, r)
	if !ok {
		return resp, false
	}
	ctx, cancel, ok := a.call(w, r)
	if !ok {
		return resp, false
	}
	defer cancel()
	resp, err := list(ctx, take, skip)
	if err != nil {
		a.fail(w, op, err)
		return resp, false
	}
	return resp, true
}

type subscriptionRow struct {
	UserID    string `json:"userId"`
	ID        string `json:"id"`
	Plan      string `json:"plan"`
	Recurring string `json:"recurring"`
	// BilledRecurring is the cycle billed now; Recurring the one chosen
	// (they differ while a change of cycle waits for the period's end).
	BilledRecurring   string `json:"billedRecurring"`
	Status            string `json:"status"`
	PeriodStart       string `json:"periodStart,omitempty"`
	PeriodEnd         string `json:"periodEnd,omitempty"`
	CancelAtPeriodEnd bool   `json:"cancelAtPeriodEnd"`
	CanceledAt        string `json:"canceledAt,omitempty"`
	CreatedAt         string `json:"createdAt,omitempty"`
}

func (a *billingAdmin) subscriptions(w http.ResponseWriter, r *http.Request) {
	resp, ok := listPage(a, w, r, "list subscriptions", func(ctx context.Context, take, skip int32) (*billingv1.ListSubscriptionsResponse, error) {
		return a.client.ListSubscriptions(ctx, &billingv1.ListSubscriptionsRequest{Take: take, Skip: skip})
	})
	if !ok {
		return
	}
	rows := make([]subscriptionRow, 0, len(resp.GetSubscriptions()))
	for _, s := range resp.GetSubscriptions() {
		sub := s.GetSubscription()
		rows = append(rows, subscriptionRow{
			UserID: s.GetUserId(), ID: sub.GetId(),
			Plan:            enumName(sub.GetPlan().String(), "PLAN_"),
			Recurring:       enumName(sub.GetRecurring().String(), "RECURRING_"),
			BilledRecurring: enumName(cmp.Or(sub.GetBilledRecurring(), sub.GetRecurring()).String(), "RECURRING_"),
			Status:          enumName(sub.GetStatus().String(), "SUBSCRIPTION_STATUS_"),
			PeriodStart:     stamp(sub.GetStart()), PeriodEnd: stamp(sub.GetEnd()),
			CancelAtPeriodEnd: s.GetCancelAtPeriodEnd(), CanceledAt: stamp(sub.GetCanceledAt()), CreatedAt: stamp(sub.GetCreatedAt()),
		})
	}
	writeJSON(w, map[string]any{"subscriptions": rows, "total": resp.GetTotal()})
}

type deadLetterRow struct {
	ID        string `json:"id"`
	EventID   string `json:"eventId"`
	Type      string `json:"type"`
	FailedAt  string `json:"failedAt,omitempty"`
	Attempts  uint64 `json:"attempts"`
	LastError string `json:"lastError"`
}

func (a *billingAdmin) deadLetters(w http.ResponseWriter, r *http.Request) {
	resp, ok := listPage(a, w, r, "list dead letters", func(ctx context.Context, take, skip int32) (*billingv1.ListDeadEventsResponse, error) {
		return a.client.ListDeadEvents(ctx, &billingv1.ListDeadEventsRequest{Take: take, Skip: skip})
	})
	if !ok {
		return
	}
	rows := make([]deadLetterRow, 0, len(resp.GetEvents()))
	for _, d := range resp.GetEvents() {
		rows = append(rows, deadLetterRow{ID: d.GetId(), EventID: d.GetEventId(), Type: d.GetType(),
			FailedAt: stamp(d.GetFailedAt()), Attempts: d.GetAttempts(), LastError: d.GetLastError()})
	}
	writeJSON(w, map[string]any{"deadLetters": rows, "total": resp.GetTotal()})
}

func (a *billingAdmin) retry(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := a.call(w, r)
	if !ok {
		return
	}
	defer cancel()
	resp, err := a.client.RetryDeadEvent(ctx, &billingv1.RetryDeadEventRequest{Id: r.PathValue("id")})
	if err != nil {
		a.fail(w, "retry dead letter", err)
		return
	}
	writeJSON(w, map[string]any{"retried": true, "eventId": resp.GetEventId()})
}

// fail answers a billing error in the OpenAI error shape: billing's own
// errors with their status, the parameter they name and their code in the
// admin routes' words (adminCode), an unreachable billing as
// billing_unavailable, anything else masked.
func (a *billingAdmin) fail(w http.ResponseWriter, op string, err error) {
	st := status.Convert(err)
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != contract.BillingErrorDomain {
			continue
		}
		code, convErr := strconv.Atoi(info.GetMetadata()[contract.MetaHTTPStatus])
		if convErr != nil || code < 400 || code > 599 {
			code = http.StatusInternalServerError
		}
		param := info.GetMetadata()[contract.MetaParam]
		openai.NewProblem(code, adminCode(info.GetReason(), param), st.Message(), param).Write(w)
		return
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		a.log.Warn("billing unavailable", "op", op, "code", st.Code().String())
		openai.NewProblem(http.StatusServiceUnavailable, codeBillingUnavailable, "billing is unavailable, retry later", "").Write(w)
	case codes.Unimplemented:
		openai.NewProblem(http.StatusServiceUnavailable, codeBillingUnavailable, "the billing role is older than this edge and has no operator methods", "").Write(w)
	default:
		a.log.Error("billing admin call failed", "op", op, "code", st.Code().String(), "err", st.Message())
		openai.NewProblem(http.StatusInternalServerError, "internal_error", "billing answered with an error", "").Write(w)
	}
}

// adminCode is the code an /api route gives billing's reason (its GraphQL
// code, "BILLING_NOT_CONFIGURED"): snake_case, as every /api route's, and
// a bad parameter invalid_value, as the edge's own check of it says.
func adminCode(reason, param string) string {
	if reason == graphql.CodeBadRequest && param != "" {
		return "invalid_value"
	}
	return strings.ToLower(reason)
}

// enumName turns "SUBSCRIPTION_STATUS_PAST_DUE" into "past_due".
func enumName(s, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s, prefix))
}

func stamp(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
