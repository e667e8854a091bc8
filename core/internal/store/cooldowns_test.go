package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// A cooldown is found by connection and model, whatever the model id holds
// (characters a KV key may not, or more than the key buffer on the stack),
// and a cleared one is gone at the next read.
func TestCooldownsPutGetClear(t *testing.T) {
	s, _ := openStores(t)
	c := NewCooldowns(s.Cooldowns)
	ctx := context.Background()
	until := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	for _, model := range []string{"gpt-4o-mini", "org/model:tag@v1 é", strings.Repeat("long-model/", 20)} {
		_, ok := c.Get("conn1", model)
		assert.False(t, ok, model)
		require.NoError(t, c.Put(ctx, credential.Cooldown{ConnectionID: "conn1", Model: model, Until: until, Level: 2, Reason: credential.Reason("rate_limited"), Status: 429}))
		got, ok := c.Get("conn1", model)
		require.True(t, ok, model)
		assert.Equal(t, model, got.Model)
		assert.Equal(t, 2, got.Level)
		assert.True(t, until.Equal(got.Until))
		_, ok = c.Get("conn2", model)
		assert.False(t, ok, "another connection")
		require.NoError(t, c.Clear(ctx, got))
		_, ok = c.Get("conn1", model)
		assert.False(t, ok, "cleared")
	}
}

// Two replicas share the cooldowns: a request in flight on one of them
// when the other cooled the connection for an hour neither shortens that
// hour by its own failure nor clears it by its success, whether or not its
// mirror has seen the hour yet.
func TestCooldownsKeepANewerRecordOfAnotherReplica(t *testing.T) {
	sa, sb := openStores(t)
	a, b := NewCooldowns(sa.Cooldowns), NewCooldowns(sb.Cooldowns)
	ctx := context.Background()
	now := time.Now()
	for i := range 10 {
		model := "m" + strconv.Itoa(i)
		// The record both replicas read before their requests: a cooldown
		// just over, its level retained.
		seen := credential.Cooldown{ConnectionID: "conn1", Model: model, Until: now.Add(-time.Second), Level: 1, Reason: credential.Reason("rate_limited"), Status: 429}
		require.NoError(t, a.Put(ctx, seen))
		require.Eventually(t, func() bool { _, ok := b.Get("conn1", model); return ok }, 5*time.Second, 5*time.Millisecond)

		hour := credential.Cooldown{ConnectionID: "conn1", Model: model, Until: now.Add(time.Hour), Level: 2, Reason: credential.Reason("rate_limited"), Status: 429}
		require.NoError(t, a.Put(ctx, hour))
		if i%2 == 0 {
			// The in-flight request on b fails with a 500.
			require.NoError(t, b.Put(ctx, credential.Cooldown{ConnectionID: "conn1", Model: model, Until: now.Add(30 * time.Second), Reason: credential.Reason("server"), Status: 500}))
		} else {
			// The in-flight request on b succeeds.
			require.NoError(t, b.Clear(ctx, seen))
		}
		for _, c := range []*Cooldowns{a, b} {
			require.Eventually(t, func() bool { got, ok := c.Get("conn1", model); return ok && got.Same(hour) }, 5*time.Second, 5*time.Millisecond,
				"round %d: the hour is gone", i)
		}
	}

	// A longer cooldown replaces a shorter one, and a success clears the
	// record it saw.
	longer := credential.Cooldown{ConnectionID: "conn1", Model: "m0", Until: now.Add(2 * time.Hour), Level: 3, Reason: credential.Reason("rate_limited"), Status: 429}
	require.NoError(t, b.Put(ctx, longer))
	got, ok := b.Get("conn1", "m0")
	require.True(t, ok)
	assert.True(t, got.Same(longer))
	require.NoError(t, b.Clear(ctx, got))
	_, ok = b.Get("conn1", "m0")
	assert.False(t, ok)
}

// The bucket keeps a cooldown as long as the engine may set one (an
// upstream's Retry-After, honoured up to credential.MaxRetryAfter) and its
// backoff level after it: a record forgotten earlier frees a connection its
// upstream said to leave alone.
func TestCooldownsKeptAsLongAsTheLongestCooldown(t *testing.T) {
	js := spinetest.JetStream(t)
	require.NoError(t, spine.Topology{}.Ensure(context.Background(), js))
	kv, err := js.KeyValue(context.Background(), spine.BucketCooldowns)
	require.NoError(t, err)
	st, err := kv.Status(context.Background())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, st.TTL(), credential.MaxRetryAfter+credential.DefaultRetention)
}

// A record past its cooldown and retention is not found, though the bucket
// still holds it: its backoff level no longer counts.
func TestCooldownsPastRetentionAreForgotten(t *testing.T) {
	s, _ := openStores(t)
	c := NewCooldowns(s.Cooldowns)
	ctx := context.Background()
	old := time.Now().Add(-credential.DefaultRetention - time.Minute)
	require.NoError(t, c.Put(ctx, credential.Cooldown{ConnectionID: "conn1", Model: "m", Until: old, Level: 7, Reason: credential.Reason("rate_limited"), Status: 429}))
	require.NoError(t, c.Put(ctx, credential.Cooldown{ConnectionID: "conn1", Model: "n", Until: time.Now().Add(-time.Minute), Level: 3, Reason: credential.Reason("rate_limited"), Status: 429}))
	require.Eventually(t, func() bool { _, ok := c.Get("conn1", "n"); return ok }, 5*time.Second, 5*time.Millisecond)
	_, ok := c.Get("conn1", "m")
	assert.False(t, ok, "past its retention")
	got, ok := c.Get("conn1", "n")
	require.True(t, ok, "within its retention: the level counts")
	assert.Equal(t, 3, got.Level)
}

func BenchmarkCooldownsGet(b *testing.B) {
	s, _ := openStores(b)
	c := NewCooldowns(s.Cooldowns)
	b.ReportAllocs()
	for b.Loop() {
		c.Get("k3y9z0ab", "gpt-4o-mini")
	}
}
