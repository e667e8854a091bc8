package upstream

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter reads the wait an answer asks for before the next call:
// retry-after-ms (OpenAI, Azure), else Retry-After in seconds or as an
// HTTP date (RFC 9110 section 10.2.3), from now. The wait is bounded to
// [0, limit] (a date already past is 0); ok is false when neither header
// is there or readable.
func RetryAfter(h http.Header, now time.Time, limit time.Duration) (wait time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(ms) {
			return seconds(ms/1000, limit), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(s) {
		return seconds(s, limit), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), limit), true
	}
	return 0, false
}

// seconds is s seconds bounded to [0, limit], without overflowing.
func seconds(s float64, limit time.Duration) time.Duration {
	if s >= limit.Seconds() {
		return limit
	}
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
