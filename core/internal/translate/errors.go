package translate

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"
)

// ErrInvalidRequest matches every *RequestError: the client's request cannot
// be translated (answer 400).
var ErrInvalidRequest = errors.New("invalid request")

// ErrMalformedUpstream matches errors about an upstream response or stream
// event that is not a well-formed Anthropic message (answer 502, or end the
// stream with an in-band error).
var ErrMalformedUpstream = errors.New("malformed upstream response")

// RequestError is a client request that cannot be translated. Param names the
// offending field in OpenAI's style ("messages[2].tool_calls[0].function.arguments").
type RequestError struct {
	Param   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

// Is makes errors.Is(err, ErrInvalidRequest) true.
func (e *RequestError) Is(target error) bool { return target == ErrInvalidRequest }

func invalid(param, msg string) error { return &RequestError{Param: param, Message: msg} }

// malformed wraps ErrMalformedUpstream with what was wrong.
type malformedError struct{ msg string }

func (e *malformedError) Error() string        { return "malformed upstream response: " + e.msg }
func (e *malformedError) Is(target error) bool { return target == ErrMalformedUpstream }

func malformed(msg string) error { return &malformedError{msg: msg} }

// AnthropicError is an error reported by the upstream: an error response
// body, or an `error` event in the middle of a stream.
type AnthropicError struct {
	// Type is the upstream's error type ("overloaded_error",
	// "rate_limit_error", ...).
	Type    string
	Message string
	// Code and Param are kept when the upstream already answered in
	// OpenAI's shape (some compatible servers do).
	Code, Param string
}

func (e *AnthropicError) Error() string {
	return "upstream " + e.Type + ": " + e.Message
}

// Status is the HTTP status Anthropic uses for the error type; 500 when the
// type is unknown.
func (e *AnthropicError) Status() int {
	switch e.Type {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error", "insufficient_quota":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	}
	return http.StatusInternalServerError
}

// OpenAIBody is the error in OpenAI's shape:
// {"error":{"message","type","param","code"}}. The type follows the status
// (as the edge maps statuses); the upstream's own type is kept as the code
// unless the upstream gave a code. Anthropic's refusal of a request past
// the context window has OpenAI's code for it, context_length_exceeded,
// which agents act on (Codex tells its user it ran out of room).
func (e *AnthropicError) OpenAIBody() []byte {
	typ := openAIErrorType(e.Status())
	if !knownAnthropicType(e.Type) && e.Type != "" {
		typ = e.Type // already an OpenAI type, or one we cannot improve on
	}
	code := e.Code
	if code == "" && e.Type == "invalid_request_error" && pastContextWindow(e.Message) {
		code = "context_length_exceeded"
	}
	if code == "" {
		code = e.Type
	}
	b := make([]byte, 0, 64+len(e.Message))
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, e.Message)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":`...)
	b = appendNullableString(b, e.Param)
	b = append(b, `,"code":`...)
	b = appendNullableString(b, code)
	return append(b, "}}"...)
}

// pastContextWindow reports whether an Anthropic invalid_request_error's
// message refuses a request for the context window: "prompt is too long:
// 210000 tokens > 200000 maximum", or "input length and `max_tokens` exceed
// context limit: ...".
func pastContextWindow(msg string) bool {
	return strings.HasPrefix(msg, "prompt is too long") || strings.Contains(msg, "exceed context limit")
}

func knownAnthropicType(t string) bool {
	switch t {
	case "invalid_request_error", "authentication_error", "billing_error", "permission_error",
		"not_found_error", "request_too_large", "rate_limit_error", "api_error", "timeout_error",
		"overloaded_error":
		return true
	}
	return false
}

// openAIErrorType mirrors the edge's status-to-type mapping (decisions.md).
func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusBadGateway, status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return "api_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// maxErrorText bounds how much of a non-JSON error body is quoted.
const maxErrorText = 512

// parseAnthropicError reads an error body (errorOf), or quotes anything
// else, shortened, as the message.
func parseAnthropicError(body []byte) *AnthropicError {
	if e := errorOf(body); e != nil {
		return e
	}
	msg := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	if msg == "" {
		msg = "upstream returned an empty error body"
	}
	return &AnthropicError{Type: "api_error", Message: shortened(msg)}
}

// errorOf reads the error an error body says: Anthropic's
// {"type":"error","error":{"type","message"}}, OpenAI's
// {"error":{"message","type","code","param"}}, {"error": "text"}, or
// plain text (shortened) as the message. It is nil for a body that says
// none: empty, not UTF-8, markup (a proxy's HTML page) or JSON of another
// shape.
func errorOf(body []byte) *AnthropicError {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		var inner struct {
			Type    string          `json:"type"`
			Message string          `json:"message"`
			Code    json.RawMessage `json:"code"`
			Param   json.RawMessage `json:"param"`
		}
		if json.Unmarshal(env.Error, &inner) == nil && (inner.Type != "" || inner.Message != "") {
			e := &AnthropicError{Type: inner.Type, Message: inner.Message, Code: rawString(inner.Code), Param: rawString(inner.Param)}
			if e.Type == "" {
				e.Type = "api_error"
			}
			if e.Message == "" {
				e.Message = e.Type
			}
			return e
		}
		if s := rawString(env.Error); s != "" { // {"error": "text"}
			return &AnthropicError{Type: "api_error", Message: s}
		}
	}
	msg := strings.TrimSpace(string(body))
	if msg == "" || strings.ContainsAny(msg[:1], "<{[") || !utf8.ValidString(msg) {
		return nil
	}
	return &AnthropicError{Type: "api_error", Message: shortened(msg)}
}

// shortened is msg cut at maxErrorText bytes.
func shortened(msg string) string {
	if len(msg) <= maxErrorText {
		return msg
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// rawString is the string a JSON value holds, or "" for anything else.
func rawString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
