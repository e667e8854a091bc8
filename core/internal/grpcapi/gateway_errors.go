package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/switchboardhq/switchboard/core/internal/chat"
	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// MetaUpstreamBody carries an upstream error body passed through to the
// client (truncated, valid UTF-8).
const MetaUpstreamBody = contract.MetaUpstreamBody

const maxUpstreamBody = 64 << 10

// gatewayError is the one mapping from the gateway's domain errors to gRPC
// status: routing and credential errors, upstream errors passed through,
// internal errors logged and masked. model names the requested model.
func gatewayError(log *slog.Logger, err error, model string) error {
	if err == nil {
		return nil // before the targets below, which live on the heap
	}
	var exhausted *credential.ExhaustedError
	var up *credential.UpstreamError
	var badReq *chat.RequestError
	var broken *credential.StreamError
	var notEnabled *routing.NotEnabledError
	var relogin *routing.NeedsLoginError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &badReq):
		return invalidParam(badReq.Param, badReq.Code, badReq.Message)
	case errors.As(err, &broken):
		if len(broken.Body) > 0 {
			// The upstream's own error, passed through as an answer's is.
			return statusError(codes.Unavailable, broken.Code, broken.Message, MetaHTTPStatus, strconv.Itoa(http.StatusBadGateway),
				MetaUpstreamBody, strings.ToValidUTF8(string(broken.Body), "\uFFFD"))
		}
		return statusError(codes.Unavailable, broken.Code, broken.Message, MetaHTTPStatus, strconv.Itoa(http.StatusBadGateway))
	case errors.As(err, &notEnabled):
		return invalidParam("model", "model_not_found", notEnabledMessage(notEnabled, model))
	case errors.Is(err, routing.ErrModelNotFound):
		return invalidParam("model", "model_not_found", fmt.Sprintf("the model '%s' does not exist or no connection of this machine serves it", model))
	case errors.As(err, &relogin):
		return invalidParam("model", "no_credentials", fmt.Sprintf("no active credentials for the provider of model '%s': its '%s' connections need a new login, their refresh token having been refused", model, relogin.Provider))
	case errors.Is(err, routing.ErrNoCredentials), errors.Is(err, credential.ErrNoCredentials):
		return invalidParam("model", "no_credentials", fmt.Sprintf("no active credentials for the provider of model '%s'", model))
	case errors.Is(err, dispatch.ErrUnsupportedProvider):
		return invalidParam("model", "unsupported_provider", fmt.Sprintf("the provider of model '%s' does not support this endpoint", model))
	case errors.As(err, &exhausted):
		return exhaustedStatus(exhausted)
	case errors.As(err, &up):
		return upstreamStatus(up, "upstream_error", noMessage(up.Status))
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "request timed out")
	}
	log.Error("gateway request failed", "err", err)
	return internal("internal error")
}

// noMessage is the message of an upstream's error answer passed through:
// the edge gives the client the message of the upstream's body, and this
// one, naming the status, when the body says none (empty, an HTML page);
// it holds true of a body with a message too, which a gRPC caller reads
// apart.
func noMessage(status int) string {
	s := strconv.Itoa(status)
	if t := http.StatusText(status); t != "" {
		s += " " + t
	}
	return "the upstream answered " + s
}

// notEnabledMessage says that the model the client asked for (an alias or
// a combo resolving to the one of e too) is enabled on none of its
// provider's connections.
func notEnabledMessage(e *routing.NotEnabledError, model string) string {
	msg := fmt.Sprintf("model '%s' is not among the enabled models of any active '%s' connection", e.Model, e.Provider)
	if model != "" && model != e.Model {
		msg = fmt.Sprintf("model '%s' resolves to '%s', which is not among the enabled models of any active '%s' connection", model, e.Model, e.Provider)
	}
	return msg
}

func exhaustedStatus(e *credential.ExhaustedError) error {
	switch e.Code {
	case credential.CodeRateLimited, credential.CodeQuotaExceeded:
		return withRetry(codes.ResourceExhausted, e.Code, e.Message, e.RetryAfter, http.StatusTooManyRequests)
	case credential.CodeCoolingDown:
		return withRetry(codes.Unavailable, e.Code, e.Message, e.RetryAfter, http.StatusServiceUnavailable)
	case credential.CodeUpstreamError:
		if e.Last != nil {
			return upstreamStatus(e.Last, e.Code, e.Message)
		}
	}
	st := e.Status
	if st == 0 {
		st = http.StatusBadGateway
	}
	return statusError(codeForHTTP(st), e.Code, e.Message, MetaHTTPStatus, strconv.Itoa(st))
}

func withRetry(c codes.Code, reason, msg string, after time.Duration, httpStatus int) error {
	st, err := status.New(c, msg).WithDetails(
		&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: map[string]string{MetaHTTPStatus: strconv.Itoa(httpStatus)}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(after)},
	)
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}

// upstreamStatus passes an upstream's error answer through: its status, its
// body and the wait it asks for.
func upstreamStatus(up *credential.UpstreamError, reason, msg string) error {
	body := up.Body
	if len(body) > maxUpstreamBody {
		body = body[:maxUpstreamBody]
	}
	meta := map[string]string{
		MetaHTTPStatus:   strconv.Itoa(up.Status),
		MetaUpstreamBody: strings.ToValidUTF8(string(body), "\uFFFD"),
	}
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}}
	// Every form an upstream uses (seconds, an HTTP date, fractions,
	// retry-after-ms) reaches the client, as whole seconds rounded up.
	if wait := up.RetryAfter(time.Now()); wait > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
	}
	st, err := status.New(codeForHTTP(up.Status), msg).WithDetails(details...)
	if err != nil {
		return status.Error(codeForHTTP(up.Status), msg)
	}
	return st.Err()
}

// codeForHTTP maps an HTTP status to the closest gRPC code.
func codeForHTTP(s int) codes.Code {
	switch {
	case s == http.StatusBadRequest, s == http.StatusUnprocessableEntity, s == http.StatusRequestEntityTooLarge:
		return codes.InvalidArgument
	case s == http.StatusUnauthorized:
		return codes.Unauthenticated
	case s == http.StatusForbidden, s == http.StatusPaymentRequired:
		return codes.PermissionDenied
	case s == http.StatusNotFound:
		return codes.NotFound
	case s == http.StatusConflict:
		return codes.Aborted
	case s == http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case s == http.StatusRequestTimeout, s == http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case s == http.StatusNotImplemented:
		return codes.Unimplemented
	case s == http.StatusBadGateway, s == http.StatusServiceUnavailable:
		return codes.Unavailable
	case s >= 500:
		return codes.Unavailable
	}
	return codes.FailedPrecondition
}
