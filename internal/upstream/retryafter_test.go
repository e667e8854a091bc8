package upstream

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// An answer's wait is read from retry-after-ms first, else Retry-After in
// seconds or as a date, bounded to [0, limit]; anything else is no wait.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "30"}, 30 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"milliseconds first", map[string]string{"Retry-After-Ms": "250", "Retry-After": "30"}, 250 * time.Millisecond, true},
		{"a date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"a date past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{"past the limit", map[string]string{"Retry-After": "999999999"}, time.Hour, true},
		{"negative", map[string]string{"Retry-After": "-5"}, 0, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		got, ok := RetryAfter(h, now, time.Hour)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
	}
}
