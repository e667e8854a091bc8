package upstream

import (
	"encoding/json"
	"net/http"
)

// OpenAIError reads an OpenAI error object (an answer's or a chunk's error
// member): the body {"error": obj} that carries it on, and the status it
// stands for: its code's own when that is an HTTP error status
// (OpenRouter's numeric codes), else the status OpenAI gives the code
// (CodeStatus), else, for a code that tells none (null, as OpenAI and
// many compatible servers send it, or one of a server's own), the status
// of its type (TypeStatus). ok is false when obj is no error object with a
// message.
func OpenAIError(obj []byte) (body []byte, status int, ok bool) {
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(obj, &e) != nil || e.Message == "" {
		return nil, 0, false
	}
	status = http.StatusBadGateway
	var n int
	var s string
	switch {
	case json.Unmarshal(e.Code, &n) == nil && n >= 400 && n <= 599:
		status = n
	case json.Unmarshal(e.Code, &s) == nil:
		status = CodeStatus(&s)
	}
	if status == http.StatusBadGateway {
		status = TypeStatus(e.Type)
	}
	body = make([]byte, 0, len(obj)+10)
	body = append(append(append(body, `{"error":`...), obj...), '}')
	return body, status, true
}

// TypeStatus is the status OpenAI answers an error of type typ with, for
// the types of a client's error; 502 for the others (a server_error says no
// more than that the upstream failed).
func TypeStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "rate_limit_error":
		return http.StatusTooManyRequests
	}
	return http.StatusBadGateway
}

// CodeStatus is the status OpenAI answers an error code with, as far as
// the code tells it; 502 when it does not.
func CodeStatus(code *string) int {
	if code == nil {
		return http.StatusBadGateway
	}
	switch *code {
	case "context_length_exceeded", "invalid_prompt", "invalid_request_error", "invalid_value", "unsupported_parameter":
		return http.StatusBadRequest
	case "rate_limit_exceeded", "insufficient_quota":
		return http.StatusTooManyRequests
	case "server_error", "internal_error":
		return http.StatusInternalServerError
	case "server_is_overloaded", "slow_down":
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}
