package upstreamtest

import (
	"net/http"
	"strings"
	"time"
)

type faultKind uint8

const (
	faultNone faultKind = iota
	faultStatus
	faultReset
	faultHang
	faultCut
	faultStall
	faultMalformed
	faultNoDone
	faultNoFinish
)

// Fault scripts how the fake answers one request (see [Server.Enqueue]) or
// every request of a route (see [Server.SetDefault]). Build one with the
// constructors of this package. The zero Fault, like [OK], means the normal
// answer. Faults are immutable values, safe to reuse and share between
// servers.
//
// Status, reset, hang and delay faults apply to every route. Stream faults
// ([CutAfter], [StallAfter], [MalformedChunkAfter], [NoDone], [NoFinish]) act
// on the chunks of a response: the server-sent events of a streaming chat
// completion or Anthropic message (every "data:" line, or every event for
// Anthropic, counts, starting with the first one sent), or the body chunks of
// /v1/audio/speech. Any other response is a single chunk, so CutAfter(0)
// and StallAfter(0) truncate it after the headers; MalformedChunkAfter, NoDone
// and NoFinish only change server-sent event streams.
type Fault struct {
	kind   faultKind
	delay  time.Duration
	n      int
	status [numProviders]int
	body   [numProviders][]byte
	header http.Header
}

// OK returns the normal answer of the route. In a queue it lets one request
// through between faults; with SetDefault it restores the normal behaviour.
func OK() Fault { return Fault{} }

// Delayed returns a copy of f that waits d before doing anything (before
// writing the status line, resetting, or streaming). If the client goes away
// or the server closes while waiting, the connection is dropped.
func (f Fault) Delayed(d time.Duration) Fault {
	f.delay = d
	return f
}

// SlowFirstByte waits d, then answers normally. It is OK().Delayed(d).
func SlowFirstByte(d time.Duration) Fault { return OK().Delayed(d) }

// Status answers with the given status code and body on every route. header
// holds extra response headers as name, value pairs (for example
// "Retry-After", "2"); a Content-Type is guessed from the body (JSON when it
// starts with '{' or '[', else text/plain) unless given. It panics if header
// has an odd length.
func Status(code int, body string, header ...string) Fault {
	if len(header)%2 != 0 {
		panic("upstreamtest.Status: header must be name, value pairs")
	}
	h := http.Header{}
	if t := strings.TrimLeft(body, " \t\r\n"); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	for i := 0; i < len(header); i += 2 {
		if http.CanonicalHeaderKey(header[i]) == "Content-Type" {
			h.Set(header[i], header[i+1])
		} else {
			h.Add(header[i], header[i+1])
		}
	}
	return Fault{
		kind:   faultStatus,
		status: [numProviders]int{code, code},
		body:   [numProviders][]byte{[]byte(body), []byte(body)},
		header: h,
	}
}

// OpenAIError answers with status code and OpenAI's error body
// {"error":{"message":msg,"type":typ,"param":null,"code":errCode}} (an empty
// errCode is encoded as null).
func OpenAIError(code int, typ, errCode, msg string) Fault {
	return Status(code, string(openAIErrorBody(typ, errCode, "", msg)))
}

// AnthropicError answers with status code and Anthropic's error body
// {"type":"error","error":{"type":typ,"message":msg}}; typ is for example
// "invalid_request_error", "rate_limit_error" or "overloaded_error".
func AnthropicError(code int, typ, msg string) Fault {
	return Status(code, string(anthropicErrorBody(typ, msg)))
}

// providerFault builds a status fault whose body is in the shape of the
// provider of the route it hits.
func providerFault(openAIStatus int, openAIBody []byte, anthropicStatus int, anthropicBody []byte, header http.Header) Fault {
	header.Set("Content-Type", "application/json")
	return Fault{
		kind:   faultStatus,
		status: [numProviders]int{openAIStatus, anthropicStatus},
		body:   [numProviders][]byte{openAIBody, anthropicBody},
		header: header,
	}
}

// RateLimited answers 429 with the provider's rate-limit error body
// (OpenAI code "rate_limit_exceeded", Anthropic type "rate_limit_error") and,
// when retryAfter is not empty, a Retry-After header with that value.
func RateLimited(retryAfter string) Fault {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return providerFault(
		http.StatusTooManyRequests, openAIErrorBody("requests", "rate_limit_exceeded", "", msgOpenAIRateLimit),
		http.StatusTooManyRequests, anthropicErrorBody("rate_limit_error", msgAnthropicRateLimit),
		h)
}

// Unauthorized answers 401 as the provider does for an expired or revoked
// credential: OpenAI code "invalid_api_key", Anthropic type
// "authentication_error" (expired OAuth token).
func Unauthorized() Fault {
	return providerFault(
		http.StatusUnauthorized, openAIErrorBody("invalid_request_error", "invalid_api_key", "", msgOpenAIBadKey),
		http.StatusUnauthorized, anthropicErrorBody("authentication_error", msgAnthropicExpired),
		http.Header{})
}

// Overloaded answers as an overloaded provider: 503 with an OpenAI
// "server_error" body, or Anthropic's 529 "overloaded_error".
func Overloaded() Fault {
	return providerFault(
		http.StatusServiceUnavailable, openAIErrorBody("server_error", "", "", msgOpenAIOverloaded),
		529, anthropicErrorBody("overloaded_error", msgAnthropicOverload),
		http.Header{})
}

// ResetBeforeBytes reads the request, then closes the TCP connection with
// SO_LINGER 0 before writing anything, so the client sees a connection reset.
//
// Go's http.Transport transparently retries an idempotent request (such as
// GET /v1/models) that fails this way on a reused keep-alive connection; the
// retry is a new request to the fake.
func ResetBeforeBytes() Fault { return Fault{kind: faultReset} }

// Hang never answers: the handler holds the request until the client goes
// away or the server closes, then drops the connection.
func Hang() Fault { return Fault{kind: faultHang} }

// CutAfter sends the response headers and the first n chunks, then closes
// the connection abruptly (no [DONE], no message_stop, no end of the chunked
// body), so the client sees an unexpected EOF. If the response has n chunks
// or fewer, they are all sent before the connection is dropped.
func CutAfter(n int) Fault { return Fault{kind: faultCut, n: n} }

// StallAfter sends the response headers and the first n chunks, then sends
// nothing more until the client goes away or the server closes, when the
// connection is dropped.
func StallAfter(n int) Fault { return Fault{kind: faultStall, n: n} }

// MalformedChunkAfter sends n good chunks, then a chunk that is not JSON
// ("data: {not json"; for Anthropic under "event: content_block_delta"), then
// the rest of the stream as normal.
func MalformedChunkAfter(n int) Fault { return Fault{kind: faultMalformed, n: n} }

// NoDone streams every chunk, including the finish reason and usage, but
// never the terminator (OpenAI "data: [DONE]", Anthropic message_stop); the
// response body then ends cleanly.
func NoDone() Fault { return Fault{kind: faultNoDone} }

// NoFinish streams the content but ends the body cleanly right after it:
// no finish_reason chunk, no usage chunk and no [DONE] (for Anthropic: no
// content_block_stop, message_delta or message_stop).
func NoFinish() Fault { return Fault{kind: faultNoFinish} }
