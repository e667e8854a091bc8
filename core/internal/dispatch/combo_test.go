package dispatch

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboardhq/switchboard/core/internal/credential"
)

// When no model of a combo can serve, the client is told to come back when
// the first model's connections are free (failover row 14), whatever the
// order of the models; outcomes other than cooling pass through as the last
// model's.
func TestComboExhaustedAnswersTheEarliestEnd(t *testing.T) {
	limited := func(d time.Duration) *credential.ExhaustedError {
		return &credential.ExhaustedError{Status: 429, Code: credential.CodeRateLimited, RetryAfter: d, Message: "limited"}
	}
	cooling := func(d time.Duration) *credential.ExhaustedError {
		return &credential.ExhaustedError{Status: 503, Code: credential.CodeCoolingDown, RetryAfter: d, Message: "cooling"}
	}
	noQuota := func(d time.Duration) *credential.ExhaustedError {
		return &credential.ExhaustedError{Status: 429, Code: credential.CodeQuotaExceeded, RetryAfter: d, Message: "out of quota"}
	}
	failed := &credential.ExhaustedError{Status: 500, Code: credential.CodeUpstreamError,
		Last: &credential.UpstreamError{Status: 500}, Message: "failed"}
	type answer struct {
		Status     int
		Code       string
		RetryAfter time.Duration
	}
	for _, tc := range []struct {
		name string
		errs []*credential.ExhaustedError
		want answer
	}{
		{"all rate limited, earliest first", []*credential.ExhaustedError{limited(5 * time.Second), limited(time.Minute)},
			answer{http.StatusTooManyRequests, credential.CodeRateLimited, 5 * time.Second}},
		{"all rate limited, earliest last", []*credential.ExhaustedError{limited(time.Minute), limited(5 * time.Second)},
			answer{http.StatusTooManyRequests, credential.CodeRateLimited, 5 * time.Second}},
		{"rate limited and cooling down", []*credential.ExhaustedError{limited(5 * time.Second), cooling(30 * time.Second), limited(time.Minute)},
			answer{http.StatusServiceUnavailable, credential.CodeCoolingDown, 5 * time.Second}},
		{"a model failed otherwise", []*credential.ExhaustedError{limited(5 * time.Second), failed, limited(time.Minute)},
			answer{http.StatusTooManyRequests, credential.CodeRateLimited, time.Minute}},
		{"all out of quota", []*credential.ExhaustedError{noQuota(time.Minute), noQuota(5 * time.Second)},
			answer{http.StatusTooManyRequests, credential.CodeQuotaExceeded, 5 * time.Second}},
		{"out of quota and rate limited", []*credential.ExhaustedError{noQuota(time.Minute), limited(5 * time.Second)},
			answer{http.StatusTooManyRequests, credential.CodeRateLimited, 5 * time.Second}},
		{"out of quota and cooling down", []*credential.ExhaustedError{noQuota(5 * time.Second), cooling(30 * time.Second)},
			answer{http.StatusServiceUnavailable, credential.CodeCoolingDown, 5 * time.Second}},
		{"one model", []*credential.ExhaustedError{limited(time.Minute)},
			answer{http.StatusTooManyRequests, credential.CodeRateLimited, time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := tc.errs[len(tc.errs)-1]
			err := comboExhausted("chatter", tc.errs, last)
			var ex *credential.ExhaustedError
			if !errors.As(err, &ex) {
				t.Fatalf("got %v, want an ExhaustedError", err)
			}
			if diff := cmp.Diff(tc.want, answer{ex.Status, ex.Code, ex.RetryAfter}); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	if err := comboExhausted("chatter", []*credential.ExhaustedError{limited(time.Second)}, credential.ErrNoCredentials); !errors.Is(err, credential.ErrNoCredentials) {
		t.Errorf("a last model without credentials answers %v", err)
	}
}
