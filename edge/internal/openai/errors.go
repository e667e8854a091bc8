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
	"unicode/utf8"

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
var ErrShuttingDown = contract.ErrShuttingDown

// errShutdown is the answer of a request the edge's shutdown ended: a 503
// the client may send again, to another replica.
var errShutdown = func() error {
	st, _ := status.New(codes.Unavailable, "the gateway is shutting down; send the request again").
		WithDetails(&errdetails.ErrorInfo{Reason: contract.ReasonShuttingDown})
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

// FromCallError is FromError for the error of r's call to core: the 503
// shutting_down when the edge's shutdown ended r.
func FromCallError(r *http.Request, err error) Problem {
	return FromError(shutdownOr(r, err))
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
		httpStatus, code, msg, param = libraryError(st.Code(), httpStatus, msg)
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
		} else if msg := upstreamMessage([]byte(upstreamBody)); msg != "" {
			p.Body.Error.Message = msg
		}
	}
	return p
}

// maxUpstreamMessage bounds the upstream message an error carries: past
// it, a body is a page or a dump, not a message.
const maxUpstreamMessage = 1000

// upstreamMessage is the message of an upstream error body that is no
// OpenAI error object, or "": its detail (upstreamDetail), a string under
// "error" ({"error": "..."}, as LM Studio and many servers answer), a
// string under "message" at the top (Mistral's errors, vLLM's before they
// took OpenAI's shape), or the body itself when it is short plain text,
// not JSON nor an HTML page.
func upstreamMessage(b []byte) string {
	if msg := upstreamDetail(b); msg != "" {
		return msg
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return ""
	}
	if text[0] == '{' || text[0] == '[' {
		var e struct {
			Error   json.RawMessage `json:"error"`
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(b, &e) != nil {
			return ""
		}
		var msg string
		if json.Unmarshal(e.Error, &msg) != nil {
			_ = json.Unmarshal(e.Message, &msg)
		}
		text = strings.TrimSpace(msg)
	} else if text[0] == '<' || !utf8.ValidString(text) {
		return ""
	}
	if len(text) > maxUpstreamMessage {
		return ""
	}
	return text
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
	if msg = strings.TrimSpace(msg); len(msg) > maxUpstreamMessage {
		return ""
	}
	return msg
}

// libraryError is the status, stable code, message and param of a gRPC
// error without an ErrorInfo reason.
func libraryError(c codes.Code, httpStatus int, msg string) (int, string, string, string) {
	switch c {
	case codes.InvalidArgument, codes.OutOfRange:
		if code, m, param := undecodable(msg); code != "" {
			return http.StatusBadRequest, code, m, param
		}
		return http.StatusBadRequest, "invalid_request",
			"the request is not valid for this route (malformed JSON, or a field or path parameter of the wrong type)", ""
	case codes.ResourceExhausted:
		// gRPC's message size limit: the request, not a rate limit.
		return http.StatusRequestEntityTooLarge, "request_too_large", "the request is larger than the server accepts", ""
	case codes.NotFound:
		return httpStatus, "not_found", "not found", ""
	case codes.Unimplemented:
		return httpStatus, "not_implemented", "this operation is not implemented", ""
	case codes.Unauthenticated:
		return httpStatus, "unauthenticated", "authentication is required", ""
	case codes.PermissionDenied:
		return httpStatus, "permission_denied", "permission denied", ""
	case codes.AlreadyExists:
		return httpStatus, "already_exists", "already exists", ""
	case codes.FailedPrecondition, codes.Aborted:
		return httpStatus, "conflict", "the request conflicts with the current state", ""
	}
	return httpStatus, "", msg, ""
}

// undecodable reads grpc-gateway's words for a request it could not decode
// (a query parameter, the JSON body, a field of it) as the code, the
// message naming the parameter and what it must be, and the param; code is
// "" for other words. The value sent is never repeated.
func undecodable(msg string) (code, message, param string) {
	// A query parameter: `parsing field "limit": strconv.ParseInt: parsing
	// "abc": invalid syntax`, `too many values for field "limit": 1, 2`.
	for _, prefix := range []string{"parsing field ", "parsing list "} {
		if name, rest, ok := cutQuoted(msg, prefix); ok {
			return "invalid_value", queryProblem(name, rest), name
		}
	}
	if name, _, ok := cutQuoted(msg, "too many values for field "); ok {
		return "invalid_value", name + " must be given once", name
	}
	// The body: encoding/json's words for one that is not JSON, then
	// protojson's for JSON that does not fit the route's message (after
	// "proto:" and a space, a regular or a non-breaking one: protobuf picks
	// one per build).
	rest, proto := strings.CutPrefix(msg, "proto:")
	rest = strings.TrimLeft(rest, " \u00a0")
	if strings.HasPrefix(msg, "invalid character ") || msg == "unexpected EOF" ||
		strings.HasPrefix(msg, "unexpected end of JSON input") || (proto && rest == "unexpected EOF") {
		return "invalid_json", "the request body is not valid JSON", ""
	}
	if !proto {
		return "", "", ""
	}
	// "syntax error (line 1:9): unexpected token ...", "(line 1:10):
	// invalid value for string field code: 5"
	rest, syntax := strings.CutPrefix(rest, "syntax error ")
	head, detail, ok := strings.Cut(rest, "): ")
	pos, found := strings.CutPrefix(head, "(line ")
	if !ok || !found {
		return "", "", ""
	}
	line, col, _ := strings.Cut(pos, ":")
	where := "line " + line + ", column " + col
	switch {
	case syntax && pos == "1:1":
		return "invalid_json", "the request body must be a JSON object", ""
	case syntax:
		return "invalid_type", "the request body has a value of the wrong type at " + where, ""
	}
	if rest, ok := strings.CutPrefix(detail, fieldErrorHead); ok {
		if name, what, ok := strings.Cut(rest, fieldErrorMust); ok && name != "" {
			return "invalid_type", name + " must be " + what, name
		}
	}
	if kindField, ok := strings.CutPrefix(detail, "invalid value for "); ok {
		// "invalid value for int32 field stickyLimit: 1.5"
		kind, field, _ := strings.Cut(kindField, " field ")
		name, _, _ := strings.Cut(field, ": ")
		if what, ok := fieldKinds[kind]; ok && name != "" {
			return "invalid_type", name + " must be " + what, name
		}
	}
	if name, ok := strings.CutPrefix(detail, "duplicate field "); ok {
		name = strings.Trim(name, `"`)
		return "invalid_value", name + " is given more than once", name
	}
	return "invalid_value", "the request body has a value this route does not take at " + where, ""
}

// cutQuoted reads `<prefix>"<name>": <rest>`.
func cutQuoted(s, prefix string) (name, rest string, ok bool) {
	if s, ok = strings.CutPrefix(s, prefix+`"`); !ok {
		return "", "", false
	}
	name, rest, ok = strings.Cut(s, `"`)
	return name, strings.TrimPrefix(rest, ": "), ok && name != ""
}

// queryProblem says what a query parameter that could not be parsed must
// be, from the parser's words (rest).
func queryProblem(name, rest string) string {
	switch {
	case strings.HasPrefix(rest, "parsing time "):
		return name + " must be an RFC 3339 time (such as 2026-01-02T15:04:05Z)"
	case strings.HasSuffix(rest, "value out of range"):
		return name + " is out of range"
	case strings.HasPrefix(rest, "strconv.ParseInt: "):
		return name + " must be an integer"
	case strings.HasPrefix(rest, "strconv.ParseUint: "):
		return name + " must be a non-negative integer"
	case strings.HasPrefix(rest, "strconv.ParseFloat: "):
		return name + " must be a number"
	case strings.HasPrefix(rest, "strconv.ParseBool: "):
		return name + " must be true or false"
	}
	return name + " is not a valid value"
}

// The words of FieldError, after protojson's "proto: (line 1:12): ".
const (
	fieldErrorHead = "invalid value for the field "
	fieldErrorMust = ", which must be "
)

// FieldError is the error of a body whose field (named by its whole path,
// combos[1].models) has a value of the wrong kind, at a line and column of
// the body, in protojson's form, which undecodable reads into the field's
// name as param and what it must be.
func FieldError(line, col int, name, what string) error {
	return errors.New("proto: (line " + strconv.Itoa(line) + ":" + strconv.Itoa(col) + "): " + fieldErrorHead + name + fieldErrorMust + what)
}

// FieldKind is what a body field of a protobuf kind ("int32", "string")
// must be, or "" for a kind without words here.
func FieldKind(kind string) string { return fieldKinds[kind] }

// fieldKinds is what a body field of each protobuf kind must be.
var fieldKinds = map[string]string{
	"string": "a string", "bool": "a boolean", "bytes": "base64-encoded bytes",
	"int32": "a 32-bit integer", "sint32": "a 32-bit integer", "sfixed32": "a 32-bit integer",
	"int64": "a 64-bit integer", "sint64": "a 64-bit integer", "sfixed64": "a 64-bit integer",
	"uint32": "a non-negative 32-bit integer", "fixed32": "a non-negative 32-bit integer",
	"uint64": "a non-negative 64-bit integer", "fixed64": "a non-negative 64-bit integer",
	"float": "a number", "double": "a number", "enum": "one of its named values",
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
