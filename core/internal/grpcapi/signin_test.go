package grpcapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// signInBucket is the sign-in codes' bucket on an embedded NATS server, as
// a core replica keeps them.
func signInBucket(t *testing.T) signInCodes {
	js := spinetest.JetStream(t)
	kv, err := js.CreateKeyValue(context.Background(), signInBucketConfig(spine.Topology{}))
	require.NoError(t, err)
	return signInCodes{kv: kv, js: js}
}

// signInBucketConfig is the sign-in codes' bucket in top.
func signInBucketConfig(top spine.Topology) jetstream.KeyValueConfig {
	buckets := top.Buckets()
	return buckets[slices.IndexFunc(buckets, func(b jetstream.KeyValueConfig) bool { return b.Bucket == spine.BucketSignInCodes })]
}

func TestSignInCodesAreSingleUseAndShortLived(t *testing.T) {
	ctx := context.Background()
	codes := signInBucket(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Two replicas: what one mints, the other redeems.
	a, b := codes, codes
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
	codes := signInBucket(t)
	now := time.Now()
	for range 5 {
		code, err := codes.mint(ctx, now)
		require.NoError(t, err)
		var won atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := codes.redeem(ctx, code, now)
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

// In a cluster a code is redeemed at its first try through any member, the
// moment it was minted: a core connected to a member that has not applied
// the write yet (one a slower link away from the bucket's leader; a
// key-value get is answered by the member a client is connected to) does
// not refuse the code as unknown.
func TestSignInCodeRedeemedThroughALaggingMember(t *testing.T) {
	ctx := context.Background()
	c := spinetest.StartCluster(t, 3)
	kvs := make([]jetstream.KeyValue, c.Size())
	jss := make([]jetstream.JetStream, c.Size())
	conns := make([]*nats.Conn, c.Size())
	for i := range kvs {
		nc, err := spine.Connect(ctx, c.URL(i), "test", nil)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		conns[i] = nc
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		if i == 0 {
			require.NoError(t, spine.EnsureBuckets(ctx, js, signInBucketConfig(spine.Topology{Replicas: c.Size()})))
		}
		kvs[i], err = js.KeyValue(ctx, spine.BucketSignInCodes)
		require.NoError(t, err)
		jss[i] = js
	}
	// The last member is the slow one: the writer is the leader, another.
	slow := c.Size() - 1
	leader := -1
	require.Eventually(t, func() bool {
		st, err := kvs[0].Status(ctx)
		if err != nil {
			return false
		}
		info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
		if info.Cluster == nil {
			return false
		}
		for i := range c.Size() {
			if c.Name(i) == info.Cluster.Leader {
				leader = i
			}
		}
		if leader == slow {
			_, _ = conns[0].Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_"+spine.BucketSignInCodes, nil, 5*time.Second)
		}
		return leader >= 0 && leader != slow
	}, 30*time.Second, 50*time.Millisecond, "a leader other than the slow member")
	writer, reader := signInCodes{kv: kvs[leader], js: jss[leader]}, signInCodes{kv: kvs[slow], js: jss[slow]}

	c.SetLag(50 * time.Millisecond)
	// The slow member answers gets (once it has caught up), and answers
	// them from what it has applied.
	require.Eventually(t, func() bool {
		if _, err := kvs[leader].Put(ctx, "probe", []byte("x")); err != nil {
			return false
		}
		_, err := kvs[slow].Get(ctx, "probe")
		_ = kvs[leader].Purge(ctx, "probe")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, 30*time.Second, 100*time.Millisecond, "the slow member lags")

	const rounds = 20
	refused := 0
	for range rounds {
		now := time.Now()
		code, err := writer.mint(ctx, now)
		require.NoError(t, err)
		ok, err := reader.redeem(ctx, code, now)
		require.NoError(t, err)
		if !ok {
			refused++
		}
	}
	assert.Zero(t, refused, "codes refused at their first try, of %d", rounds)
}
