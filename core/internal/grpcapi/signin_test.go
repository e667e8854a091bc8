package grpcapi

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// signInBucket is the sign-in codes' bucket on an embedded NATS server.
func signInBucket(t *testing.T) jetstream.KeyValue {
	return spinetest.Bucket(t, spine.BucketSignInCodes, spine.Topology{}.Buckets())
}

func TestSignInCodesAreSingleUseAndShortLived(t *testing.T) {
	ctx := context.Background()
	kv := signInBucket(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Two replicas: what one mints, the other redeems.
	a, b := signInCodes{kv: kv}, signInCodes{kv: kv}
	code, err := a.mint(ctx, now)
	require.NoError(t, err)
	assert.Len(t, code, 32, "192 random bits")
	other, err := a.mint(ctx, now)
	require.NoError(t, err)
	assert.NotEqual(t, code, other, "each code is new")

	redeem := func(s signInCodes, code string, at time.Time) bool {
		t.Helper()
		ok, err := s.redeem(ctx, code, at)
		require.NoError(t, err)
		return ok
	}
	assert.False(t, redeem(b, "not-a-code", now))
	assert.True(t, redeem(b, code, now.Add(SignInCodeTTL-time.Second)), "redeemed through another replica")
	assert.False(t, redeem(a, code, now), "a code works once")
	assert.False(t, redeem(b, code, now))

	late, err := a.mint(ctx, now)
	require.NoError(t, err)
	assert.False(t, redeem(b, late, now.Add(SignInCodeTTL)), "an expired code is refused")
	assert.False(t, redeem(b, late, now), "and forgotten")

	var none signInCodes
	_, err = none.mint(ctx, now)
	assert.ErrorIs(t, err, errNoSignInCodes)
}

// Of many replicas redeeming one code at once, exactly one gets in.
func TestSignInCodeRedeemedOnceUnderRace(t *testing.T) {
	ctx := context.Background()
	kv := signInBucket(t)
	now := time.Now()
	for range 5 {
		code, err := (&signInCodes{kv: kv}).mint(ctx, now)
		require.NoError(t, err)
		var won atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := (&signInCodes{kv: kv}).redeem(ctx, code, now)
				assert.NoError(t, err)
				if ok {
					won.Add(1)
				}
			}()
		}
		wg.Wait()
		assert.EqualValues(t, 1, won.Load())
	}
}
