package graphql

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	gql "github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/edge/internal/userauth"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// billingErrorDomain is the ErrorInfo domain of billing's typed errors.
const billingErrorDomain = contract.BillingErrorDomain

// Codes the edge itself produces.
const (
	CodeUnauthenticated    = "UNAUTHENTICATED"
	CodeForbidden          = "FORBIDDEN"
	CodeInternal           = "INTERNAL_SERVER_ERROR"
	CodeBillingUnavailable = "BILLING_UNAVAILABLE"
	// CodeAuthUnavailable answers a token that cannot be checked because
	// the identity provider's key set could not be loaded: the token may be
	// valid, so a frontend keeps its user signed in and tries again.
	CodeAuthUnavailable = "AUTH_UNAVAILABLE"
)

// Error is a GraphQL error with a stable code and an HTTP-like status,
// rendered as `extensions { code, status }`.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// notSignedIn is the error of a request without a user, for cause (what
// userauth.FromContext told): UNAUTHENTICATED, or AUTH_UNAVAILABLE when the
// token could not be checked at all.
func notSignedIn(cause error) *Error {
	if errors.Is(cause, userauth.ErrKeysUnavailable) {
		return &Error{Code: CodeAuthUnavailable, Status: http.StatusServiceUnavailable,
			Message: "Sign-in cannot be checked right now: the identity provider's signing keys could not be loaded. Please try again."}
	}
	msg := "You must sign in first to access this resource."
	if errors.Is(cause, userauth.ErrInvalidToken) {
		msg = "The bearer token is invalid or expired."
	} else if errors.Is(cause, userauth.ErrNotConfigured) {
		msg = "User sign-in is not configured on this server."
	}
	return &Error{Code: CodeUnauthenticated, Status: http.StatusUnauthorized, Message: msg}
}

func forbidden() error {
	return &Error{Code: CodeForbidden, Status: http.StatusForbidden, Message: "You can only read your own billing data."}
}

// fromStatus maps a gRPC error of billing: its typed errors keep their code,
// status and message; anything else is masked.
func fromStatus(st *status.Status) (*Error, bool) {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != billingErrorDomain {
			continue
		}
		httpStatus, err := strconv.Atoi(info.GetMetadata()[contract.MetaHTTPStatus])
		if err != nil || httpStatus == 0 {
			httpStatus = http.StatusInternalServerError
		}
		if httpStatus >= 500 && info.GetReason() == CodeInternal {
			return &Error{Code: CodeInternal, Status: httpStatus, Message: "An internal error occurred."}, true
		}
		return &Error{Code: info.GetReason(), Status: httpStatus, Message: st.Message()}, true
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		return &Error{Code: CodeBillingUnavailable, Status: http.StatusServiceUnavailable, Message: "Billing is unavailable, please try again."}, false
	case codes.Canceled:
		return &Error{Code: "CANCELED", Status: 499, Message: "The request was canceled."}, false
	}
	return &Error{Code: CodeInternal, Status: http.StatusInternalServerError, Message: "An internal error occurred."}, false
}

// errorPresenter renders resolver errors with extensions {code, status}.
// GraphQL's own errors (parse, validation) keep their gqlgen form, without
// their "Did you mean" suggestions for a caller who may not introspect the
// schema (see mayIntrospect; open as there).
func errorPresenter(log *slog.Logger, open bool) gql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gerr := gql.DefaultErrorPresenter(ctx, err)
		var e *Error
		if !errors.As(err, &e) {
			if st, ok := status.FromError(unwrapAll(err)); ok {
				var typed bool
				e, typed = fromStatus(st)
				if !typed {
					log.Warn("billing call failed", "path", gerr.Path.String(), "code", st.Code().String(), "err", st.Message())
				}
			} else if _, isGQL := err.(*gqlerror.Error); isGQL && gerr.Extensions != nil {
				if !mayIntrospect(ctx, open) {
					gerr.Message = withoutSuggestions(gerr.Message)
				}
				if _, ok := gerr.Extensions["status"]; !ok && errcode.GetErrorKind(gqlerror.List{gerr}) == errcode.KindProtocol {
					// Not parsable, not valid or over a limit: answered
					// 422, which the error says as the others do.
					gerr.Extensions["status"] = http.StatusUnprocessableEntity
				}
				return gerr
			} else if isGQL && len(gerr.Path) == 0 {
				// The transport's own error about the request (its
				// message may hold the body): a client error, logged
				// without it.
				log.Debug("graphql request refused", "bytes", len(gerr.Message))
				e = &Error{Code: CodeBadRequest, Status: http.StatusBadRequest, Message: "The request is not a valid GraphQL request."}
			} else {
				log.Error("graphql resolver failed", "path", gerr.Path.String(), "err", err)
				e = &Error{Code: CodeInternal, Status: http.StatusInternalServerError, Message: "An internal error occurred."}
			}
		}
		gerr.Message = e.Message
		gerr.Extensions = map[string]any{"code": e.Code, "status": e.Status}
		return gerr
	}
}

// unwrapAll returns the innermost error of a gqlerror wrapping.
func unwrapAll(err error) error {
	for {
		var g *gqlerror.Error
		if errors.As(err, &g) && g.Err != nil && g.Err != err {
			err = g.Err
			continue
		}
		return err
	}
}

// recoverFunc masks panics of resolvers.
func recoverFunc(log *slog.Logger) gql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.Error("graphql resolver panicked", "panic", p)
		return &Error{Code: CodeInternal, Status: http.StatusInternalServerError, Message: "An internal error occurred."}
	}
}
