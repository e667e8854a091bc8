package credential

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMemoryCooldowns(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := NewMemoryCooldowns(clock.Now, time.Minute)

	_, ok := s.Get("a", "m")
	require.False(t, ok)

	c := Cooldown{ConnectionID: "a", Model: "m", Until: clock.Now().Add(10 * time.Second), Level: 2, Reason: ReasonRateLimited, Status: 429}
	require.NoError(t, s.Put(ctx, c))
	got, ok := s.Get("a", "m")
	require.True(t, ok)
	require.Equal(t, c, got)
	_, ok = s.Get("a", "other")
	require.False(t, ok, "per model")

	clock.Advance(30 * time.Second)
	got, ok = s.Get("a", "m")
	require.True(t, ok, "kept past Until for its level")
	require.Equal(t, 2, got.Level)

	clock.Advance(41 * time.Second)
	_, ok = s.Get("a", "m")
	require.False(t, ok, "expired after the retention")

	require.NoError(t, s.Put(ctx, c))
	require.NoError(t, s.Clear(ctx, c))
	_, ok = s.Get("a", "m")
	require.False(t, ok)
}

// A record is never shortened by a Put, and a Clear removes only the record
// it names: what requests in flight while a newer cooldown was written do
// leaves that cooldown as it is.
func TestMemoryCooldownsKeepNewerRecords(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := NewMemoryCooldowns(clock.Now, time.Minute)
	seen := Cooldown{ConnectionID: "a", Model: "m", Until: clock.Now().Add(-time.Second), Level: 1, Reason: ReasonRateLimited, Status: 429}
	require.NoError(t, s.Put(ctx, seen))
	hour := Cooldown{ConnectionID: "a", Model: "m", Until: clock.Now().Add(time.Hour), Level: 1, Reason: ReasonRateLimited, Status: 429}
	require.NoError(t, s.Put(ctx, hour))

	require.NoError(t, s.Put(ctx, Cooldown{ConnectionID: "a", Model: "m", Until: clock.Now().Add(30 * time.Second), Reason: ReasonServer, Status: 500}))
	got, _ := s.Get("a", "m")
	require.Equal(t, hour, got, "a shorter cooldown does not replace a longer one")

	require.NoError(t, s.Clear(ctx, seen))
	got, ok := s.Get("a", "m")
	require.True(t, ok, "a Clear of the record read before removed a newer one")
	require.Equal(t, hour, got)

	longer := Cooldown{ConnectionID: "a", Model: "m", Until: clock.Now().Add(2 * time.Hour), Level: 2, Reason: ReasonRateLimited, Status: 429}
	require.NoError(t, s.Put(ctx, longer))
	got, _ = s.Get("a", "m")
	require.Equal(t, longer, got, "a longer cooldown replaces a shorter one")
	require.NoError(t, s.Clear(ctx, longer))
	_, ok = s.Get("a", "m")
	require.False(t, ok)
}

func TestMemoryCooldownsSweepsExpired(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := NewMemoryCooldowns(clock.Now, time.Minute)
	for i := range 100 {
		require.NoError(t, s.Put(ctx, Cooldown{ConnectionID: fmt.Sprint(i), Model: "m", Until: clock.Now()}))
	}
	clock.Advance(2 * time.Minute)
	for i := range 64 {
		require.NoError(t, s.Put(ctx, Cooldown{ConnectionID: fmt.Sprint("new", i), Model: "m", Until: clock.Now()}))
	}
	s.mu.RLock()
	n := len(s.m)
	s.mu.RUnlock()
	require.LessOrEqual(t, n, 64)
}

func TestMemoryCooldownsConcurrent(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryCooldowns(nil, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				id := fmt.Sprint(i % 10)
				switch (g + i) % 3 {
				case 0:
					_ = s.Put(ctx, Cooldown{ConnectionID: id, Model: "m", Until: time.Now().Add(time.Second)})
				case 1:
					s.Get(id, "m")
				default:
					if c, ok := s.Get(id, "m"); ok {
						_ = s.Clear(ctx, c)
					}
				}
			}
		})
	}
	wg.Wait()
}
