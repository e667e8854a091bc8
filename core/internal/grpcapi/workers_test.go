package grpcapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A refresh failure's reason keeps the workers' words, the status and an
// OAuth error code, and hides what of the connection's secrets a token
// endpoint put in its code: a secret whole, or the 64 characters of one a
// code is cut to; a run shorter than 8 characters stays.
func TestHideSecrets(t *testing.T) {
	long := "rt_" + strings.Repeat("a1B2c3D4", 12)
	for _, tc := range []struct{ reason, want string }{
		{"refresh token refused: token endpoint answered 400 (invalid_grant); sign in again",
			"refresh token refused: token endpoint answered 400 (invalid_grant); sign in again"},
		{"token refresh failed: token endpoint answered 400 (rt-one-0a93fe)",
			"token refresh failed: token endpoint answered 400 ([hidden])"},
		{"token refresh failed: token endpoint answered 400 (" + long[:64] + ")",
			"token refresh failed: token endpoint answered 400 ([hidden])"},
		{"é at-acc (at-access-1234)", "é at-acc ([hidden])"},
	} {
		assert.Equal(t, tc.want, hideSecrets(tc.reason, "at-access-1234", "rt-one-0a93fe", long, ""))
	}
}
