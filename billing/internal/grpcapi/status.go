// Package grpcapi is billing's gRPC surface: the switchboard.billing.v1
// Billing service, and the one mapping from billing's errors to gRPC status.
package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/billing/internal/account"
	"github.com/switchboardhq/switchboard/billing/internal/webhook"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// ErrorDomain is the errdetails.ErrorInfo domain of billing's errors.
const ErrorDomain = contract.BillingErrorDomain

// MetaHTTPStatus is the ErrorInfo metadata key of the HTTP status a front
// end should answer with.
const MetaHTTPStatus = contract.MetaHTTPStatus

// errUserMismatch: a request body names another user than the one the edge
// vouched for.
var errUserMismatch = &account.Error{Code: CodeUserMismatch, Status: http.StatusForbidden, Message: "the request names another user than the signed-in one"}

// Codes of webhook intake failures.
const (
	CodeInvalidSignature  = "INVALID_SIGNATURE"
	CodeStaleSignature    = "STALE_SIGNATURE"
	CodeUnsupportedAPI    = "UNSUPPORTED_API_VERSION"
	CodeMalformedEvent    = "MALFORMED_EVENT"
	CodeEventNotStored    = "EVENT_NOT_STORED"
	CodeInternal          = "INTERNAL_SERVER_ERROR"
	CodeWebhookNotEnabled = "BILLING_NOT_CONFIGURED"
	// CodeUserMismatch: the body's user is not the vouched one.
	CodeUserMismatch = "USER_MISMATCH"
)

func statusError(code codes.Code, reason, msg string, httpStatus int) error {
	return statusWith(code, reason, msg, map[string]string{MetaHTTPStatus: strconv.Itoa(httpStatus)})
}

func statusWith(code codes.Code, reason, msg string, meta map[string]string) error {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}
	st, err := status.New(code, msg).WithDetails(info)
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// paramError is a BAD_REQUEST about one request parameter, which its
// status names (ErrorInfo metadata contract.MetaParam), as the edge names
// the parameter of the checks it makes itself.
type paramError struct {
	param string
	err   *account.Error
}

func (e *paramError) Error() string { return e.err.Error() }
func (e *paramError) Unwrap() error { return e.err }

// badParam is an invalid value of the request parameter param.
func badParam(param, msg string) error {
	return &paramError{param: param, err: account.BadRequest(msg)}
}

// toStatus maps an error of the billing flows to a gRPC status. Errors that
// are not billing's own are logged and masked.
func toStatus(ctx context.Context, log *slog.Logger, op string, err error) error {
	if err == nil {
		return nil
	}
	var e *account.Error
	if errors.As(err, &e) {
		meta := map[string]string{MetaHTTPStatus: strconv.Itoa(e.Status)}
		var pe *paramError
		if errors.As(err, &pe) {
			meta[contract.MetaParam] = pe.param
		}
		return statusWith(grpcCode(e), e.Code, e.Message, meta)
	}
	switch {
	case errors.Is(err, webhook.ErrNotConfigured):
		return statusError(codes.FailedPrecondition, CodeWebhookNotEnabled, "stripe webhooks are not configured on this server", http.StatusServiceUnavailable)
	case errors.Is(err, webhook.ErrBadSignature):
		return statusError(codes.InvalidArgument, CodeInvalidSignature, err.Error(), http.StatusBadRequest)
	case errors.Is(err, webhook.ErrStale):
		return statusError(codes.InvalidArgument, CodeStaleSignature, err.Error(), http.StatusBadRequest)
	case errors.Is(err, webhook.ErrAPIVersion):
		return statusError(codes.InvalidArgument, CodeUnsupportedAPI, err.Error(), http.StatusBadRequest)
	case errors.Is(err, webhook.ErrMalformed):
		return statusError(codes.InvalidArgument, CodeMalformedEvent, "webhook event is malformed", http.StatusBadRequest)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	log.Error("billing call failed", "op", op, "err", err)
	return statusError(codes.Internal, CodeInternal, "internal error", http.StatusInternalServerError)
}

func grpcCode(e *account.Error) codes.Code {
	switch e.Status {
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		if e.Code == account.ErrKeyInUse.Code {
			return codes.Aborted
		}
		if e.Code == account.ErrProviderRefused.Code {
			return codes.FailedPrecondition
		}
		return codes.AlreadyExists
	case http.StatusUnprocessableEntity:
		return codes.InvalidArgument
	case http.StatusGone:
		return codes.FailedPrecondition
	case http.StatusBadGateway:
		return codes.Unavailable
	case http.StatusServiceUnavailable:
		return codes.FailedPrecondition
	case http.StatusBadRequest:
		if e.Code == "BAD_REQUEST" {
			return codes.InvalidArgument
		}
		return codes.FailedPrecondition
	}
	return codes.Unknown
}
