package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/billing/billingtest"
	"github.com/switchboardhq/switchboard/edge/internal/graphql/model"
	"github.com/switchboardhq/switchboard/edge/internal/userauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

const secret = "graphql-test-secret"

func post(t *testing.T, url, token, query string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func firstExtensions(out map[string]any) map[string]any {
	errs, _ := out["errors"].([]any)
	if len(errs) == 0 {
		return nil
	}
	ext, _ := errs[0].(map[string]any)["extensions"].(map[string]any)
	return ext
}

// failingBilling answers every call with one error.
type failingBilling struct{ err error }

func (f failingBilling) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return f.err
}
func (f failingBilling) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, f.err
}

func typed(code codes.Code, reason, msg string, httpStatus int) error {
	st, _ := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{
		Reason: reason, Domain: "switchboard.billing", Metadata: map[string]string{"http_status": fmt.Sprint(httpStatus)},
	})
	return st.Err()
}

func TestErrorMapping(t *testing.T) {
	tok, err := userauth.Mint(secret, "u1", "", time.Hour)
	require.NoError(t, err)
	tests := []struct {
		name    string
		err     error
		code    string
		status  float64
		message string
	}{
		{"typed", typed(codes.AlreadyExists, "SUBSCRIPTION_ALREADY_EXISTS", "You already have a subscription", 409), "SUBSCRIPTION_ALREADY_EXISTS", 409, "You already have a subscription"},
		{"internal masked", typed(codes.Internal, "INTERNAL_SERVER_ERROR", "internal error", 500), "INTERNAL_SERVER_ERROR", 500, "An internal error occurred."},
		{"untyped masked", status.Error(codes.Internal, "db password is hunter2"), "INTERNAL_SERVER_ERROR", 500, "An internal error occurred."},
		{"unavailable", status.Error(codes.Unavailable, "connection refused 10.0.0.7"), "BILLING_UNAVAILABLE", 503, "Billing is unavailable, please try again."},
		{"not a status", errors.New("boom with secret"), "INTERNAL_SERVER_ERROR", 500, "An internal error occurred."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(NewHandler(failingBilling{tt.err}, userauth.New(userauth.Config{Secret: secret}), slog.New(slog.DiscardHandler)))
			defer srv.Close()
			out := post(t, srv.URL, tok, `mutation { checkout(recurring: Monthly) }`)
			ext := firstExtensions(out)
			require.Equal(t, tt.code, ext["code"])
			require.Equal(t, tt.status, ext["status"])
			msg := out["errors"].([]any)[0].(map[string]any)["message"]
			require.Equal(t, tt.message, msg)
		})
	}
}

func TestDateTime(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2024, 5, 1, 14, 30, 0, 0, time.FixedZone("x", 2*3600))
	model.MarshalDateTime(at).MarshalGQL(&buf)
	require.Equal(t, `"2024-05-01T12:30:00Z"`, buf.String())
	back, err := model.UnmarshalDateTime("2024-05-01T12:30:00Z")
	require.NoError(t, err)
	require.True(t, back.Equal(at))
	_, err = model.UnmarshalDateTime("yesterday")
	require.Error(t, err)
	_, err = model.UnmarshalDateTime(12)
	require.Error(t, err)
}

func TestConversions(t *testing.T) {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	monthly := model.SubscriptionRecurringMonthly
	changes := start.AddDate(1, 0, 0)
	want := &model.UserSubscription{
		ID: "sub_1", Plan: model.SubscriptionPlanTeam, Recurring: model.SubscriptionRecurringMonthly,
		BilledRecurring: model.SubscriptionRecurringYearly,
		Status:          model.SubscriptionStatusPastDue, Start: start, End: changes,
		PendingRecurring: &monthly, RecurringChangesAt: &changes,
	}
	for name, s := range map[string]*billingv1.Subscription{
		"chosen and billed cycles": {
			Id: "sub_1", Plan: billingv1.Plan_PLAN_TEAM, Recurring: billingv1.Recurring_RECURRING_MONTHLY,
			BilledRecurring: billingv1.Recurring_RECURRING_YEARLY,
			Status:          billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAST_DUE,
			Start:           tsOf(start), End: tsOf(changes),
			PendingRecurring: billingv1.Recurring_RECURRING_MONTHLY, RecurringChangesAt: tsOf(changes),
		},
		// A billing of an earlier release: recurring is the cycle billed now.
		"billed cycle only": {
			Id: "sub_1", Plan: billingv1.Plan_PLAN_TEAM, Recurring: billingv1.Recurring_RECURRING_YEARLY,
			Status: billingv1.SubscriptionStatus_SUBSCRIPTION_STATUS_PAST_DUE,
			Start:  tsOf(start), End: tsOf(changes),
			PendingRecurring: billingv1.Recurring_RECURRING_MONTHLY, RecurringChangesAt: tsOf(changes),
		},
	} {
		if diff := cmp.Diff(want, subscriptionFromProto(s)); diff != "" {
			t.Fatalf("%s: subscription (-want +got):\n%s", name, diff)
		}
	}
	require.Nil(t, subscriptionFromProto(nil))
}

// TestHandlerAgainstBilling runs the handler in front of a real billing role.
func TestHandlerAgainstBilling(t *testing.T) {
	h := billingtest.Start(t, billingtest.Options{})
	srv := httptest.NewServer(NewHandler(h.Conn, userauth.New(userauth.Config{Secret: secret}), slog.New(slog.DiscardHandler)))
	defer srv.Close()
	tok, err := userauth.Mint(secret, "u1", "u1@example.com", time.Hour)
	require.NoError(t, err)

	out := post(t, srv.URL, tok, `{ currentUser { id email subscription { id } invoices { id } invoiceCount } prices { plan amount } }`)
	require.Nil(t, out["errors"])
	user := out["data"].(map[string]any)["currentUser"].(map[string]any)
	require.Equal(t, "u1", user["id"])
	require.Equal(t, "u1@example.com", user["email"])
	require.Nil(t, user["subscription"])
	require.Equal(t, float64(0), user["invoiceCount"])

	out = post(t, srv.URL, "", `{ currentUser { id } prices { plan } }`)
	require.Equal(t, "UNAUTHENTICATED", firstExtensions(out)["code"])
	require.NotEmpty(t, out["data"].(map[string]any)["prices"], "public fields still answer")

	out = post(t, srv.URL, tok, `{ currentUser { invoices(take: 1000) { id } } }`)
	require.Equal(t, "BAD_REQUEST", firstExtensions(out)["code"])
}
