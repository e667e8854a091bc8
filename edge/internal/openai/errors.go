// Package openai holds the edge's OpenAI wire conventions: the error body
// every /v1 and /api route answers with, and the one mapping from gRPC status
// to it.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// ErrorBody is OpenAI's error response: {"error": {...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error is the inner object of ErrorBody. Param and Code are null when unset,
// as OpenAI sends them.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// TypeForStatus is the OpenAI error type of an HTTP status (decisions.md).
func TypeForStatus(code int) string {
	switch {
	case code == http.StatusBadRequest, code == http.StatusRequestEntityTooLarge,
		code == http.StatusUnprocessableEntity, code == http.StatusMethodNotAllowed,
		code == http.StatusUnsupportedMediaType, code == http.StatusConflict:
		return "invalid_request_error"
	case code == http.StatusUnauthorized:
		return "authentication_error"
	case code == http.StatusForbidden:
		return "permission_error"
	case code == http.StatusNotFound:
		return "not_found_error"
	case code == http.StatusTooManyRequests:
		return "rate_limit_error"
	case code == http.StatusBadGateway, code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return "api_error"
	case code >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// Problem is a rendered error: status, body and the headers that go with it.
type Problem struct {
	Status     int
	Body       ErrorBody
	RetryAfter time.Duration
	// Raw, when set, is an upstream's OpenAI-shaped error body, passed
	// through instead of Body.
	Raw []byte
}

// NewProblem builds a Problem; param may be empty.
func NewProblem(httpStatus int, code, message, param string) Problem {
	p := Problem{Status: httpStatus, Body: ErrorBody{Error: Error{Message: message, Type: TypeForStatus(httpStatus)}}}
	if code != "" {
		p.Body.Error.Code = &code
	}
	if param != "" {
		p.Body.Error.Param = &param
	}
	return p
}

// writeProblemHeader starts an error answer of either shape: JSON, a
// Retry-After in whole seconds (rounded up) when set, and the status.
func writeProblemHeader(w http.ResponseWriter, status int, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(status)
}

// Write sends the problem.
func (p Problem) Write(w http.ResponseWriter) {
	writeProblemHeader(w, p.Status, p.RetryAfter)
	if p.Raw != nil {
		_, _ = w.Write(p.Raw)
		return
	}
	b, _ := marshalNoEscape(p.Body)
	_, _ = w.Write(b)
}

// marshalNoEscape encodes v as JSON without HTML escaping, newline-ended.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// ErrShuttingDown is the cause the edge cancels the requests still in
// flight with once its shutdown's grace period is over.
var ErrShuttingDown = errors.New("the gateway is shutting down")

// errShutdown is the answer of a request the edge's shutdown ended: a 503
// the client may send again, to another replica.
var errShutdown = func() error {
	st, _ := status.New(codes.Unavailable, "the gateway is shutting down; send the request again").
		WithDetails(&errdetails.ErrorInfo{Reason: "shutting_down"})
	return st.Err()
}()

// shutdownOr is err, or errShutdown when the edge's shutdown ended r (an
// answer that came whole, io.EOF, stays as it is).
func shutdownOr(r *http.Request, err error) error {
	if err == nil || errors.Is(err, io.EOF) || !errors.Is(context.Cause(r.Context()), ErrShuttingDown) {
		return err
	}
	return errShutdown
}

// FromError maps an error of a gRPC call to core or billing to the OpenAI
// shape: the status from the gRPC code (or the upstream status core passes
// through), the code from ErrorInfo's reason, the param and Retry-After from
// the details. Internal errors are masked.
func FromError(err error) Problem {
	st := status.Convert(err)
	httpStatus := HTTPStatus(st.Code())
	var code, param, upstreamBody string
	var retry time.Duration
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			code = d.GetReason()
			param = d.GetMetadata()[contract.MetaParam]
			if s, err := strconv.Atoi(d.GetMetadata()[contract.MetaHTTPStatus]); err == nil && s >= 400 && s <= 599 {
				httpStatus = s
			}
			upstreamBody = d.GetMetadata()[contract.MetaUpstreamBody]
		case *errdetails.RetryInfo:
			retry = d.GetRetryDelay().AsDuration()
		}
	}
	msg := st.Message()
	if code == "" {
		// Not one of core's or billing's errors (they all carry a reason):
		// the gateway's decoding or the gRPC library speaking. Its message
		// is a library's, so it is replaced; the code is a stable one.
		httpStatus, code, msg = libraryError(st.Code(), httpStatus, msg)
	}
	switch st.Code() {
	case codes.Internal, codes.Unknown, codes.DataLoss:
		if code == "" {
			msg, code = "internal error", "internal_error"
		}
	case codes.Unavailable:
		if code == "" {
			msg, code = "service unavailable, try again", "service_unavailable"
		}
	case codes.Canceled:
		if code == "" {
			code = "canceled"
		}
	case codes.DeadlineExceeded:
		if code == "" {
			code = "timeout"
		}
	}
	p := NewProblem(httpStatus, code, msg, param)
	p.RetryAfter = retry
	if upstreamBody != "" {
		if isOpenAIError([]byte(upstreamBody)) {
			p.Raw = []byte(upstreamBody)
		} else if detail := upstreamDetail([]byte(upstreamBody)); detail != "" {
			p.Body.Error.Message = detail
		}
	}
	return p
}

// upstreamDetail is the message of an upstream error body shaped
// {"detail": ...} (the ChatGPT backend's, and FastAPI servers'), or "": a
// string, an object's message, or the msg of each item of a list (FastAPI's
// validation errors).
func upstreamDetail(b []byte) string {
	var e struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(b, &e) != nil || len(e.Detail) == 0 {
		return ""
	}
	var msg string
	var obj struct {
		Message string `json:"message"`
	}
	var list []struct {
		Msg string `json:"msg"`
	}
	switch {
	case json.Unmarshal(e.Detail, &msg) == nil:
	case json.Unmarshal(e.Detail, &obj) == nil:
		msg = obj.Message
	case json.Unmarshal(e.Detail, &list) == nil:
		var msgs []string
		for _, it := range list {
			if it.Msg != "" {
				msgs = append(msgs, it.Msg)
			}
		}
		msg = strings.Join(msgs, "; ")
	}
	if msg = strings.TrimSpace(msg); len(msg) > 1000 {
		return ""
	}
	return msg
}

// libraryError is the status, stable code and message of a gRPC error
// without an ErrorInfo reason.
func libraryError(c codes.Code, httpStatus int, msg string) (int, string, string) {
	switch c {
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest, "invalid_request",
			"the request is not valid for this route (malformed JSON, or a field or path parameter of the wrong type)"
	case codes.ResourceExhausted:
		// gRPC's message size limit: the request, not a rate limit.
		return http.StatusRequestEntityTooLarge, "request_too_large", "the request is larger than the server accepts"
	case codes.NotFound:
		return httpStatus, "not_found", "not found"
	case codes.Unimplemented:
		return httpStatus, "not_implemented", "this operation is not implemented"
	case codes.Unauthenticated:
		return httpStatus, "unauthenticated", "authentication is required"
	case codes.PermissionDenied:
		return httpStatus, "permission_denied", "permission denied"
	case codes.AlreadyExists:
		return httpStatus, "already_exists", "already exists"
	case codes.FailedPrecondition, codes.Aborted:
		return httpStatus, "conflict", "the request conflicts with the current state"
	}
	return httpStatus, "", msg
}

// isOpenAIError reports whether an upstream body is already an OpenAI error
// object, which is then passed through as the upstream wrote it.
func isOpenAIError(b []byte) bool {
	var e struct {
		Error *struct {
			Message *string `json:"message"`
		} `json:"error"`
	}
	return json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != nil
}

// HTTPStatus maps a gRPC code to an HTTP status, as grpc-gateway does for
// the routes it serves.
func HTTPStatus(c codes.Code) int { return runtime.HTTPStatusFromCode(c) }
