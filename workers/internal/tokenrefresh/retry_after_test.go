package tokenrefresh

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A token endpoint that answers 429 or 503 with Retry-After is asked again
// no sooner than it said: the job's error carries the wait (the job
// consumer redelivers it then), in seconds or as an HTTP date; an answer
// naming no wait, or one that is not temporary, carries none. The same
// holds for an OAuth token endpoint's refresh and for GitHub Copilot's
// token exchange.
func TestTokenRefreshKeepsTheEndpointsRetryAfter(t *testing.T) {
	endpoints := []struct {
		name  string
		admin func(url string) *fakeAdmin
	}{
		{"token endpoint", func(url string) *fakeAdmin { return newFakeAdmin(url+"/token", 3) }},
		{"copilot exchange", func(url string) *fakeAdmin { return newCopilotAdmin(url+"/copilot_internal/v2/token", 3) }},
	}
	cases := []struct {
		name       string
		status     int
		retryAfter string
		want       time.Duration // zero: no wait named
		slack      time.Duration
	}{
		{name: "429 in seconds", status: http.StatusTooManyRequests, retryAfter: "30", want: 30 * time.Second},
		{name: "503 as a date", status: http.StatusServiceUnavailable, retryAfter: time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), want: 90 * time.Second, slack: 2 * time.Second},
		{name: "429 without one", status: http.StatusTooManyRequests},
		{name: "garbled", status: http.StatusTooManyRequests, retryAfter: "soon"},
	}
	for _, ep := range endpoints {
		for _, tc := range cases {
			t.Run(ep.name+"/"+tc.name, func(t *testing.T) {
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					_, _ = io.WriteString(w, `{"error":"slow_down"}`)
				}))
				t.Cleanup(ts.Close)
				admin := ep.admin(ts.URL)
				r, logs := newRefresher(admin)
				err := r.Handle(context.Background(), job(3))
				require.Error(t, err)
				assert.Empty(t, admin.storedRequests(), "a temporary refusal is not recorded")
				var d interface{ RetryAfter() time.Duration }
				if tc.want == 0 {
					if errors.As(err, &d) {
						assert.Zero(t, d.RetryAfter())
					}
					return
				}
				require.True(t, errors.As(err, &d), "the error names the endpoint's wait: %v", err)
				assert.InDelta(t, tc.want.Seconds(), d.RetryAfter().Seconds(), tc.slack.Seconds()+0.001)
				assertNoSecrets(t, "the job error", err.Error())
				assert.NotContains(t, err.Error(), githubToken)
				assertNoSecrets(t, "the log", logs.String())
			})
		}
	}
}
