package credential

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	reset := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

	tests := []struct {
		name string
		err  error
		want Failure
	}{
		{"nil", nil, Failure{}},
		{"429 Retry-After seconds", retryAfterHeader(2),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: 2 * time.Second, Cooldown: 2 * time.Second}},
		{"429 Retry-After date", upErr(429, "", "Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: 90 * time.Second, Cooldown: 90 * time.Second}},
		{"429 retry-after-ms wins", upErr(429, "", "Retry-After", "2", "Retry-After-Ms", "1500"),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: 1500 * time.Millisecond, Cooldown: 1500 * time.Millisecond}},
		{"429 Retry-After 0 cools a second", upErr(429, "", "Retry-After", "0"),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: time.Second, Cooldown: time.Second}},
		{"429 huge Retry-After capped", upErr(429, "", "Retry-After", "99999999999"),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: MaxRetryAfter, Cooldown: MaxRetryAfter}},
		{"429 garbage Retry-After ignored", upErr(429, "", "Retry-After", "soon"),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, Cooldown: BaseBackoff}},
		{"429 without hint", upErr(429, `{"error":{"message":"Rate limit reached"}}`),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, Cooldown: BaseBackoff}},
		{"429 quota text", upErr(429, `{"error":{"code":"insufficient_quota"}}`),
			Failure{Reason: ReasonQuota, Status: 429, Fallback: true, Cooldown: BaseBackoff}},
		{"429 resets_in_seconds", upErr(429, `{"error":{"type":"usage_limit_reached","resets_in_seconds":120}}`),
			Failure{Reason: ReasonQuota, Status: 429, Fallback: true, RetryAfter: 2 * time.Minute, Cooldown: 2 * time.Minute}},
		{"429 resets_at capped at 30 min", upErr(429, `{"error":{"type":"usage_limit_reached","resets_at":`+reset(3*time.Hour)+`}}`),
			Failure{Reason: ReasonQuota, Status: 429, Fallback: true, RetryAfter: MaxResetHint, Cooldown: MaxResetHint}},
		{"429 resets_at in milliseconds", upErr(429, `{"error":{"resets_at":`+reset(10*time.Minute)+`000}}`),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: 10 * time.Minute, Cooldown: 10 * time.Minute}},
		{"429 resets_at past ignored", upErr(429, `{"error":{"resets_at":`+reset(-time.Hour)+`}}`),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, Cooldown: BaseBackoff}},
		{"429 google retryDelay", upErr(429, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"41s"}]}}`),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: 41 * time.Second, Cooldown: 41 * time.Second}},
		{"429 header beats body", upErr(429, `{"resets_in_seconds":600}`, "Retry-After", "3"),
			Failure{Reason: ReasonRateLimited, Status: 429, Fallback: true, RetryAfter: 3 * time.Second, Cooldown: 3 * time.Second}},
		{"500", upErr(500, "boom"),
			Failure{Reason: ReasonServer, Status: 500, Fallback: true, Cooldown: TransientCooldown}},
		{"503 Retry-After honoured", upErr(503, "", "Retry-After", "7"),
			Failure{Reason: ReasonServer, Status: 503, Fallback: true, RetryAfter: 7 * time.Second, Cooldown: 7 * time.Second}},
		{"503 huge Retry-After capped at MaxBackoff", upErr(503, "", "Retry-After", "99999999"),
			Failure{Reason: ReasonServer, Status: 503, Fallback: true, RetryAfter: MaxBackoff, Cooldown: MaxBackoff}},
		{"400 Anthropic credit balance", upErr(400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`),
			Failure{Reason: ReasonQuota, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"529 overloaded is a server error", upErr(529, `{"type":"error","error":{"type":"overloaded_error"}}`),
			Failure{Reason: ReasonServer, Status: 529, Fallback: true, Cooldown: TransientCooldown}},
		{"408", upErr(408, ""),
			Failure{Reason: ReasonTimeout, Status: 408, Fallback: true, Cooldown: TransientCooldown}},
		{"401", upErr(401, `{"error":"invalid token"}`),
			Failure{Reason: ReasonAuth, Status: 401, Fallback: true, Cooldown: AuthCooldown}},
		{"403", upErr(403, "forbidden"),
			Failure{Reason: ReasonAuth, Status: 403, Fallback: true, Cooldown: AuthCooldown}},
		{"402", upErr(402, "payment required"),
			Failure{Reason: ReasonPayment, Status: 402, Fallback: true, Cooldown: AuthCooldown}},
		{"403 quota text", upErr(403, `{"error":{"message":"Quota exceeded for quota metric"}}`),
			Failure{Reason: ReasonQuota, Status: 403, Fallback: true, Cooldown: BaseBackoff}},
		{"400 quota text", upErr(400, `{"error":{"message":"You exceeded your current quota"}}`),
			Failure{Reason: ReasonQuota, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"400 budget text", upErr(400, `{"error":{"message":"Budget has been exceeded!"}}`),
			Failure{Reason: ReasonQuota, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"400 usage limit text", upErr(400, `{"detail":"The usage limit has been reached"}`),
			Failure{Reason: ReasonQuota, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"400 too many requests text", upErr(400, `Too Many Requests`),
			Failure{Reason: ReasonRateLimited, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"400 capacity text", upErr(400, `{"error":"model at capacity"}`),
			Failure{Reason: ReasonRateLimited, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"400 overloaded text", upErr(400, `{"error":"Overloaded"}`),
			Failure{Reason: ReasonRateLimited, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"400 context length", upErr(400, `{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}`),
			Failure{Reason: ReasonClient, Status: 400}},
		{"400 content filter", upErr(400, `{"error":{"code":"content_filter","message":"The response was filtered"}}`),
			Failure{Reason: ReasonClient, Status: 400}},
		{"404", upErr(404, "model not found"), Failure{Reason: ReasonClient, Status: 404}},
		{"413", upErr(413, "too large"), Failure{Reason: ReasonClient, Status: 413}},
		{"413 whatever its text", upErr(413, `{"error":{"message":"request exceeds your quota of tokens per request"}}`), Failure{Reason: ReasonClient, Status: 413}},
		{"422 quoting the request", upErr(422, `{"detail":[{"msg":"bad value","input":"rate limit exceeded"}]}`), Failure{Reason: ReasonClient, Status: 422}},
		{"400 quoting the request", upErr(400, `{"error":{"message":"Invalid value for 'tools[0].function.name': 'check_quota_rate_limit'","type":"invalid_request_error"}}`),
			Failure{Reason: ReasonClient, Status: 400}},
		{"400 quoting the request in double quotes", upErr(400, `Invalid JSON at "you exceeded your current quota"`),
			Failure{Reason: ReasonClient, Status: 400}},
		{"400 budget type", upErr(400, `{"error":{"message":"Spend exceeded","type":"budget_exceeded"}}`),
			Failure{Reason: ReasonQuota, Status: 400, Fallback: true, Cooldown: BaseBackoff}},
		{"422", upErr(422, "unprocessable"), Failure{Reason: ReasonClient, Status: 422}},
		{"wrapped upstream error", fmt.Errorf("openai: %w", upErr(500, "")),
			Failure{Reason: ReasonServer, Status: 500, Fallback: true, Cooldown: TransientCooldown}},
		{"connection reset", &url.Error{Op: "Post", URL: "https://up.example/v1?key=secret", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}},
			Failure{Reason: ReasonNetwork, Fallback: true, Cooldown: TransientCooldown}},
		{"unexpected EOF", io.ErrUnexpectedEOF,
			Failure{Reason: ReasonNetwork, Fallback: true, Cooldown: TransientCooldown}},
		{"attempt deadline", &url.Error{Op: "Post", URL: "https://up.example", Err: context.DeadlineExceeded},
			Failure{Reason: ReasonTimeout, Fallback: true, Cooldown: TransientCooldown}},
		{"net timeout", fmt.Errorf("dial: %w", timeoutErr{}),
			Failure{Reason: ReasonTimeout, Fallback: true, Cooldown: TransientCooldown}},
		{"committed network error", Committed(io.ErrUnexpectedEOF),
			Failure{Reason: ReasonNetwork, Fallback: true, Committed: true, Cooldown: TransientCooldown}},
		{"committed upstream error", Committed(upErr(502, "")),
			Failure{Reason: ReasonServer, Status: 502, Fallback: true, Committed: true, Cooldown: TransientCooldown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err, now)
			if tt.err != nil {
				require.ErrorIs(t, got.Err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Failure{}, "Err")); diff != "" {
				t.Errorf("Classify() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, w := range want {
		require.Equal(t, w*time.Second, backoff(i+1), "level %d", i+1)
	}
	require.Equal(t, MaxBackoff, backoff(1000))
	require.Equal(t, BaseBackoff, backoff(0))
}

func TestCommitted(t *testing.T) {
	require.NoError(t, Committed(nil))
	base := errors.New("stream cut")
	err := fmt.Errorf("chat: %w", Committed(base))
	require.True(t, IsCommitted(err))
	require.ErrorIs(t, err, base)
	require.False(t, IsCommitted(base))
}

func TestUpstreamErrorHidesBody(t *testing.T) {
	err := upErr(401, `{"error":"Incorrect API key provided: sk-abc123"}`)
	require.Equal(t, "credential: upstream answered 401 Unauthorized", err.Error())
}
