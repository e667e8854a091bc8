package grpcapi

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/core/internal/credential"
)

// An upstream error passed through to the client keeps the wait it asked
// for, in every form upstreams use, bounded as cooldowns are.
func TestUpstreamErrorKeepsItsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		header   []string
		min, max time.Duration // zero max: no wait passed on
	}{
		{"seconds", []string{"Retry-After", "7"}, 7 * time.Second, 7 * time.Second},
		{"HTTP date", []string{"Retry-After", time.Now().Add(40 * time.Second).UTC().Format(http.TimeFormat)}, 38 * time.Second, 40 * time.Second},
		{"fractional seconds", []string{"Retry-After", "2.5"}, 2500 * time.Millisecond, 2500 * time.Millisecond},
		{"milliseconds", []string{"Retry-After-Ms", "1500"}, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"zero", []string{"Retry-After", "0"}, time.Second, time.Second},
		{"absurd", []string{"Retry-After", "99999999"}, credential.MaxRetryAfter, credential.MaxRetryAfter},
		{"unreadable", []string{"Retry-After", "soon"}, 0, 0},
		{"none", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.header); i += 2 {
				h.Set(tc.header[i], tc.header[i+1])
			}
			up := &credential.UpstreamError{Status: http.StatusTooManyRequests, Header: h, Body: []byte(`{"error":{"message":"slow down"}}`)}
			for _, err := range []error{
				gatewayError(slog.New(slog.DiscardHandler), up, "m"),
				gatewayError(slog.New(slog.DiscardHandler), &credential.ExhaustedError{Status: 429, Code: credential.CodeUpstreamError, Last: up}, "m"),
			} {
				var wait time.Duration
				for _, d := range status.Convert(err).Details() {
					if ri, ok := d.(*errdetails.RetryInfo); ok {
						wait = ri.GetRetryDelay().AsDuration()
					}
				}
				if tc.max == 0 {
					assert.Zero(t, wait)
					continue
				}
				require.GreaterOrEqual(t, wait, tc.min)
				require.LessOrEqual(t, wait, tc.max)
			}
		})
	}
}
