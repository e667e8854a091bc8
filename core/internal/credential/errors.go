package credential

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// ErrNoCredentials is returned by [Engine.Do] when the request carries no
// candidates at all: the tenant has no active connection for the provider.
var ErrNoCredentials = errors.New("credential: no credentials for the provider")

// Outcome codes of an [*ExhaustedError]; they are the stable snake_case
// `code` of the OpenAI-shaped error body.
const (
	// CodeRateLimited: every candidate is rate limited or out of quota (429);
	// OpenAI's own code for a rate limit (decisions.md, error codes).
	CodeRateLimited = "rate_limit_exceeded"
	// CodeQuotaExceeded: every candidate is cooling down for want of quota,
	// budget or credit (429); OpenAI's own code for it.
	CodeQuotaExceeded = "insufficient_quota"
	// CodeCoolingDown: every candidate is cooling down and at least one of
	// them for a reason other than rate limits; none was tried (503).
	CodeCoolingDown = "credentials_cooling_down"
	// CodeUpstreamError: the candidates failed for mixed or other reasons and
	// at least one upstream answered; the last answer is passed through.
	CodeUpstreamError = "upstream_error"
	// CodeUpstreamUnreachable: no upstream answered at all (network errors
	// and timeouts only) (502).
	CodeUpstreamUnreachable = "upstream_unreachable"
)

// UpstreamError is an HTTP error answer of an upstream. An [Attempt] returns
// it (or an error wrapping it) when the upstream answered with an error status.
type UpstreamError struct {
	// Status is the upstream's HTTP status code.
	Status int
	// Header holds the upstream's response headers (Retry-After is read from
	// it).
	Header http.Header
	// Body is the upstream's response body, or its first bytes.
	Body []byte
}

// Error reports the status only: upstream bodies may echo parts of a
// credential, so they never go into error strings or logs.
func (e *UpstreamError) Error() string {
	return "credential: upstream answered " + statusText(e.Status)
}

// RetryAfter is the wait the upstream's answer asks for in its headers:
// retry-after-ms, or Retry-After in seconds (fractional ones too) or as an
// HTTP date, read as [Classify] reads them for cooldowns and bounded as it
// bounds them (at least a second, at most [MaxRetryAfter]). It is zero when
// the answer asks for no wait it can read. now is the instant a date is
// counted from.
func (e *UpstreamError) RetryAfter(now time.Time) time.Duration {
	return headerHint(e.Header, now)
}

func statusText(status int) string {
	s := strconv.Itoa(status)
	if t := http.StatusText(status); t != "" {
		s += " " + t
	}
	return s
}

// committedError marks an attempt error that happened after bytes were sent
// to the client.
type committedError struct{ err error }

func (e *committedError) Error() string { return e.err.Error() }
func (e *committedError) Unwrap() error { return e.err }

// Committed wraps the error of an attempt that had already sent bytes to the
// client (a stream that started). The engine then neither retries nor falls
// back: it records the cooldown the error deserves and returns the error.
// Committed(nil) is nil.
func Committed(err error) error {
	if err == nil {
		return nil
	}
	return &committedError{err: err}
}

// IsCommitted reports whether err, or an error it wraps, was marked with
// [Committed].
func IsCommitted(err error) bool {
	var c *committedError
	return errors.As(err, &c)
}

// StreamError ends a stream that already started (a chat answer's, a
// streamed transcription's), marked with [Committed].
type StreamError struct {
	// Code is stream_interrupted, stream_stalled, stream_malformed or
	// upstream_error.
	Code    string
	Message string
	// Body is the upstream's own error, when it reported one in its
	// stream: an Anthropic error event's data, or an OpenAI error object;
	// the client gets it in place of the gateway's.
	Body []byte
	// Upstream is that error as the answer it stands for: the status the
	// same error would have come with before the stream, and its body. The
	// engine classifies the failure by it (Unwrap), as it does that
	// answer: a refused prompt is the request's own fault and cools
	// nothing, a rate limit goes on the rate-limit backoff, an overload is
	// a server failure; without it, the stream's end is a network failure.
	Upstream *UpstreamError
}

func (e *StreamError) Error() string { return e.Message }

// Unwrap is the upstream's error, if it reported one.
func (e *StreamError) Unwrap() error {
	if e.Upstream == nil {
		return nil
	}
	return e.Upstream
}

// ExhaustedError is returned by [Engine.Do] when no candidate could serve the
// request. Status, Code and RetryAfter are what the HTTP layer answers.
type ExhaustedError struct {
	// Status is the HTTP status to answer: 429, 503, 502, or the status of
	// Last.
	Status int
	// Code is one of CodeRateLimited, CodeQuotaExceeded, CodeCoolingDown,
	// CodeUpstreamError or CodeUpstreamUnreachable.
	Code string
	// Message is a client-safe description naming provider and model and,
	// when known, the time to reset. It never contains secrets or upstream
	// bodies.
	Message string
	// RetryAfter is set for CodeRateLimited, CodeQuotaExceeded and
	// CodeCoolingDown: the time until the earliest cooldown among the
	// candidates ends, rounded up to whole seconds, at least one second. It
	// is zero otherwise.
	RetryAfter time.Duration
	// Last is the last upstream HTTP error of the request, if any upstream
	// answered. For CodeUpstreamError the HTTP layer passes its status,
	// headers and body through.
	Last *UpstreamError
}

// Error returns Message.
func (e *ExhaustedError) Error() string { return e.Message }

// Unwrap returns Last, so errors.As finds the last [*UpstreamError].
func (e *ExhaustedError) Unwrap() error {
	if e.Last == nil {
		return nil
	}
	return e.Last
}
