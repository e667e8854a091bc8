package credential

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"time"

	upstreamhttp "github.com/switchboardhq/switchboard/internal/upstream"
)

// Cooldown durations (decisions.md, Gateway "cooldowns").
const (
	// BaseBackoff is the first rate-limit cooldown when the upstream gave no
	// hint; level n waits BaseBackoff x 2^(n-1).
	BaseBackoff = 2 * time.Second
	// MaxBackoff caps the exponential rate-limit cooldown.
	MaxBackoff = 5 * time.Minute
	// MaxResetHint caps a reset time found in an upstream's error body.
	MaxResetHint = 30 * time.Minute
	// MaxRetryAfter caps an upstream's Retry-After header, a guard against
	// absurd values; an admin call clears cooldowns earlier when needed.
	MaxRetryAfter = 24 * time.Hour
	// AuthCooldown is the cooldown after 401/402/403 (after the one refresh).
	AuthCooldown = 2 * time.Minute
	// TransientCooldown is the cooldown after 5xx, 408, network errors and
	// timeouts when the upstream sent no Retry-After.
	TransientCooldown = 30 * time.Second

	// maxLevel caps the backoff level (the duration is capped long before).
	maxLevel = 15
	// minHint is the shortest cooldown an upstream hint produces: a
	// "Retry-After: 0" or a reset time already past still cools for a moment.
	minHint = time.Second
	// scanLimit bounds how much of an error body is searched for texts and
	// reset hints.
	scanLimit = 64 << 10
)

// Reason says why a connection failed or is cooling down.
type Reason string

// Reasons, as stored in [Cooldown.Reason] and [Failure.Reason].
const (
	// ReasonRateLimited: 429, or a 4xx whose body speaks of rate limits,
	// "too many requests", capacity or overload.
	ReasonRateLimited Reason = "rate_limited"
	// ReasonQuota: a 4xx (429 included) whose body speaks of a quota, budget
	// or usage limit.
	ReasonQuota Reason = "quota"
	// ReasonAuth: 401 or 403 (after the one token refresh, if any).
	ReasonAuth Reason = "auth"
	// ReasonPayment: 402 without a quota text.
	ReasonPayment Reason = "payment"
	// ReasonServer: 5xx, or any other unexpected non-4xx status.
	ReasonServer Reason = "server"
	// ReasonTimeout: 408, a deadline of the attempt, or a network timeout.
	ReasonTimeout Reason = "timeout"
	// ReasonNetwork: any other error without an HTTP answer (connection
	// refused or reset, DNS, TLS, truncated response...).
	ReasonNetwork Reason = "network"
	// ReasonClient: a 4xx that is the request's own fault (400, 404, 413,
	// 422 ...): passed to the caller, never a cooldown or fallback.
	ReasonClient Reason = "client"
)

// RateLimited reports whether r is a rate-limit or quota reason: those grow
// the backoff level and make the "all credentials rate limited" outcome.
func (r Reason) RateLimited() bool {
	return r == ReasonRateLimited || r == ReasonQuota
}

// Failure is a classified attempt error.
type Failure struct {
	// ConnectionID names the failed connection; [Classify] leaves it empty,
	// the engine fills it in.
	ConnectionID string
	// Err is the attempt's error (for a failed token refresh, both errors).
	Err error
	// Reason is the class of the failure.
	Reason Reason
	// Status is the upstream's HTTP status, 0 when none answered.
	Status int
	// Cause is, when none answered, the class and text of the transport
	// error (connection refused, DNS, TLS, ...), secret-free; the engine
	// fills it in.
	Cause string
	// Fallback reports whether the failure is fallback-eligible: the
	// connection is cooled down and the next candidate is tried. When false,
	// the error goes to the caller as it is.
	Fallback bool
	// Committed reports whether the attempt had already sent bytes to the
	// client (see [Committed]).
	Committed bool
	// RetryAfter is the upstream's own hint of when to retry (Retry-After or
	// retry-after-ms header, or for rate limits a reset time in the body),
	// already capped; zero when it gave none.
	RetryAfter time.Duration
	// Cooldown is how long the connection is cooled down for the model.
	// Classify computes it as for a first failure; the engine replaces the
	// rate-limit backoff with the one of the connection's actual level.
	Cooldown time.Duration
}

// Classify sorts an attempt's error into a [Failure], following the
// decisions' list of fallback-eligible errors:
//
//   - an [*UpstreamError] (found with errors.As) with status 429, 5xx, 408,
//     401, 402 or 403, or with any 4xx whose lower-cased body mentions
//     "budget", "quota", "usage limit", "rate limit", "rate_limit", "too many
//     requests", "capacity" or "overloaded", is eligible;
//   - any other 4xx (400, 404, 413, 422 ...) is not: it is the request's own
//     fault;
//   - any other error (network failure, timeout, truncated answer) is
//     eligible.
//
// Classify does not know the caller's context: the engine checks it first,
// so that a cancelled caller is never mistaken for a network failure. now is
// used to read reset times given as dates. Classify(nil, now) is the zero
// Failure.
func Classify(err error, now time.Time) Failure {
	if err == nil {
		return Failure{}
	}
	f := Failure{Err: err, Committed: IsCommitted(err), Fallback: true}
	var up *UpstreamError
	if !errors.As(err, &up) || up == nil || up.Status <= 0 {
		f.Reason = ReasonNetwork
		if isTimeout(err) {
			f.Reason = ReasonTimeout
		}
		f.Cooldown = TransientCooldown
		return f
	}
	f.Status = up.Status
	f.Reason = statusReason(up.Status, up.Body)
	switch f.Reason {
	case ReasonClient:
		f.Fallback = false
	case ReasonRateLimited, ReasonQuota:
		f.RetryAfter = headerHint(up.Header, now)
		if f.RetryAfter == 0 {
			f.RetryAfter = bodyHint(up.Body, now)
		}
		f.Cooldown = f.RetryAfter
		if f.Cooldown == 0 {
			f.Cooldown = backoff(1)
		}
	case ReasonAuth, ReasonPayment:
		f.Cooldown = AuthCooldown
	default: // ReasonServer, ReasonTimeout
		// A server failure's Retry-After (a maintenance page, a proxy)
		// cools the connection at most MaxBackoff: unlike a 429's quota
		// window, a day of it would take a connection out silently.
		f.RetryAfter = min(headerHint(up.Header, now), MaxBackoff)
		f.Cooldown = f.RetryAfter
		if f.Cooldown == 0 {
			f.Cooldown = TransientCooldown
		}
	}
	return f
}

// statusReason classifies an upstream HTTP error. For a 4xx the body's text
// wins over the status (a 400 or 403 saying "quota exceeded" is a quota
// failure); a 5xx is a server failure whatever its text says.
func statusReason(status int, body []byte) Reason {
	switch {
	case status == http.StatusTooManyRequests:
		if textReason(body) == ReasonQuota {
			return ReasonQuota
		}
		return ReasonRateLimited
	case status == http.StatusRequestEntityTooLarge, status == http.StatusUnprocessableEntity:
		// About the request by definition, and their bodies quote it: never
		// a connection's fault, whatever the text.
		return ReasonClient
	case status >= 400 && status < 500:
		scan := body
		if status == http.StatusBadRequest || status == http.StatusNotFound {
			// These bodies quote the request ("Invalid value for 'x':
			// '...'"): a client could make one say "quota" and cool a
			// shared connection. Only the error's own words count.
			scan = ownWords(body)
		}
		if r := textReason(scan); r != "" {
			return r
		}
		switch status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return ReasonAuth
		case http.StatusPaymentRequired:
			return ReasonPayment
		case http.StatusRequestTimeout:
			return ReasonTimeout
		}
		return ReasonClient
	default:
		return ReasonServer
	}
}

var (
	quotaTexts = [...][]byte{
		[]byte("quota"), // also "insufficient_quota", "quota exceeded"
		[]byte("budget"),
		[]byte("usage limit"),
		[]byte("usage_limit"),
		// Anthropic's 400 "Your credit balance is too low to access the
		// Anthropic API": the key's account, not the request.
		[]byte("credit balance"),
		[]byte("insufficient credit"),
	}
	rateTexts = [...][]byte{
		[]byte("rate limit"),
		[]byte("rate_limit"),
		[]byte("ratelimit"),
		[]byte("too many requests"),
		[]byte("capacity"),
		[]byte("overloaded"),
	}
)

// ownWords is what of an error body is the upstream's own words, not a
// quote of the request: from a JSON body, the string members (at any
// depth), from anything else the text, each with its quoted parts ('...',
// "...", `...`) removed.
func ownWords(body []byte) []byte {
	body = body[:min(len(body), scanLimit)]
	var v any
	if json.Unmarshal(body, &v) != nil {
		return unquoted(body)
	}
	var out []byte
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 8 {
			return
		}
		switch v := v.(type) {
		case string:
			out = append(append(out, unquoted([]byte(v))...), '\n')
		case map[string]any:
			for _, m := range v {
				walk(m, depth+1)
			}
		case []any:
			for _, m := range v {
				walk(m, depth+1)
			}
		}
	}
	walk(v, 0)
	return out
}

// unquoted returns s without its quoted parts. A quote mark is one that
// opens at the start or after a space, colon, comma or bracket (so "don't"
// opens nothing) and the quote runs to the same mark.
func unquoted(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == '\'' || c == '"' || c == '`') && (i == 0 || bytes.IndexByte([]byte(" :,([{="), s[i-1]) >= 0) {
			if j := bytes.IndexByte(s[i+1:], c); j >= 0 {
				i += j + 1
				out = append(out, ' ')
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// textReason returns ReasonQuota or ReasonRateLimited when the lower-cased
// body mentions a quota or a rate limit, "" otherwise.
func textReason(body []byte) Reason {
	if len(body) == 0 {
		return ""
	}
	lower := bytes.ToLower(body[:min(len(body), scanLimit)])
	for _, t := range quotaTexts {
		if bytes.Contains(lower, t) {
			return ReasonQuota
		}
	}
	for _, t := range rateTexts {
		if bytes.Contains(lower, t) {
			return ReasonRateLimited
		}
	}
	return ""
}

// headerHint reads retry-after-ms (OpenAI, Azure) or Retry-After (seconds
// or an HTTP date: upstream.RetryAfter). It returns 0 when neither is
// usable.
func headerHint(h http.Header, now time.Time) time.Duration {
	if d, ok := upstreamhttp.RetryAfter(h, now, MaxRetryAfter); ok {
		return clampHint(d, MaxRetryAfter)
	}
	return 0
}

// bodyHint looks for a provider's precise reset time in a JSON error body:
// "resets_at" (unix seconds or milliseconds, or an RFC 3339 string),
// "resets_in_seconds", or Google's RetryInfo "retryDelay" ("41s"). It
// returns 0 when none is found or the time is already past.
func bodyHint(body []byte, now time.Time) time.Duration {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || len(body) > scanLimit || (body[0] != '{' && body[0] != '[') {
		return 0
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0
	}
	d, ok := findHint(v, now, 0)
	if !ok || d <= 0 {
		return 0
	}
	return clampHint(d, MaxResetHint)
}

// findHint walks a decoded JSON value depth-first for a reset hint.
func findHint(v any, now time.Time, depth int) (time.Duration, bool) {
	if depth > 16 {
		return 0, false
	}
	switch v := v.(type) {
	case map[string]any:
		for _, k := range hintKeys {
			if x, ok := v[k]; ok {
				if d, ok := hintField(k, x, now); ok {
					return d, true
				}
			}
		}
		for _, x := range v {
			if d, ok := findHint(x, now, depth+1); ok {
				return d, true
			}
		}
	case []any:
		for _, x := range v {
			if d, ok := findHint(x, now, depth+1); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// hintKeys are the JSON fields read as reset hints, in order of preference.
var hintKeys = [...]string{
	"resets_at", "reset_at", "resetsAt",
	"resets_in_seconds", "reset_in_seconds", "resetsInSeconds",
	"retryDelay", "retry_delay",
}

// hintField interprets one JSON field as a reset hint.
func hintField(key string, v any, now time.Time) (time.Duration, bool) {
	switch key {
	case "resets_at", "reset_at", "resetsAt":
		switch v := v.(type) {
		case json.Number:
			f, err := v.Float64()
			if err != nil || f <= 0 {
				return 0, false
			}
			if f > 1e12 { // milliseconds
				f /= 1000
			}
			sec, frac := math.Modf(f)
			return time.Unix(int64(sec), int64(frac*1e9)).Sub(now), true
		case string:
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return 0, false
			}
			return t.Sub(now), true
		}
	case "resets_in_seconds", "reset_in_seconds", "resetsInSeconds":
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return seconds(f), true
			}
		}
	case "retryDelay", "retry_delay":
		if s, ok := v.(string); ok {
			if d, err := time.ParseDuration(s); err == nil {
				return d, true
			}
		}
	}
	return 0, false
}

// seconds converts fractional seconds to a Duration without overflowing.
func seconds(s float64) time.Duration {
	if s >= MaxRetryAfter.Seconds() {
		return MaxRetryAfter
	}
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// clampHint bounds a hint the upstream did send to [minHint, limit].
func clampHint(d, limit time.Duration) time.Duration {
	return min(max(d, minHint), limit)
}

// backoff is the rate-limit cooldown of a level: 2 s x 2^(level-1), capped.
func backoff(level int) time.Duration {
	level = min(max(level, 1), maxLevel)
	return min(BaseBackoff<<(level-1), MaxBackoff)
}

// isTimeout reports whether err is a deadline or a network timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
