package grpcapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSignInCodesAreSingleUseAndShortLived(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var s signInCodes
	code := s.mint(now)
	assert.Len(t, code, 32, "192 random bits")
	assert.NotEqual(t, code, s.mint(now), "each code is new")

	assert.False(t, s.redeem("not-a-code", now))
	assert.True(t, s.redeem(code, now.Add(SignInCodeTTL-time.Second)))
	assert.False(t, s.redeem(code, now), "a code works once")

	late := s.mint(now)
	assert.False(t, s.redeem(late, now.Add(SignInCodeTTL)), "an expired code is refused")
	assert.False(t, s.redeem(late, now), "and forgotten")

	for range 2 * maxSignInCodes {
		s.mint(now)
	}
	assert.LessOrEqual(t, len(s.codes), maxSignInCodes, "waiting codes are bounded")
}
