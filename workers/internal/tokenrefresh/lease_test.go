package tokenrefresh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// Two worker processes with a job of one connection each at once (a copy
// enqueued after the de-duplication window, a redelivery while the first
// worker still runs): the refresh token is presented once. Presented
// twice, a provider that detects reuse revokes the whole login, and one
// that rotates refuses the second: the connection would need a new login.
// The other process's job is retried and finds the refresh done.
func TestTokenRefreshOneProcessAtATime(t *testing.T) {
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	ts := newTokenServer(t, 200, `{"access_token":"`+newAccess+`","refresh_token":"rt-rotated"}`)
	ts.setHook(func() { time.Sleep(200 * time.Millisecond) })
	admin := newFakeAdmin(ts.URL+"/token", 3) // core, which both reach
	one, _ := newRefresher(admin)
	two, _ := newRefresher(admin)
	one.WithLeases(KVLeases{KV: kv}, "one")
	two.WithLeases(KVLeases{KV: kv}, "two")

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, r := range []*Refresher{one, two} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Handle(context.Background(), job(3))
		}()
	}
	wg.Wait()
	assert.Len(t, ts.received(), 1, "the refresh token was presented once")
	assert.Equal(t, uint64(4), admin.creds.GetGeneration())
	var held int
	for _, err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, ErrLeaseHeld)
			held++
		}
	}
	require.Equal(t, 1, held, "one job waits for the other's refresh: %v", errs)

	// The retry finds the refresh done, and the lease free again.
	require.NoError(t, two.Handle(context.Background(), job(3)))
	require.NoError(t, one.Handle(context.Background(), job(3)))
	assert.Len(t, ts.received(), 1)
	_, err := kv.Get(context.Background(), machineID+"."+connID)
	assert.Error(t, err, "the lease is given back")
}

// A worker that died holding a lease holds it only for the lease's time.
func TestRefreshLeaseOfADeadWorkerExpires(t *testing.T) {
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	leases := KVLeases{KV: kv}
	ctx := context.Background()
	_, err := leases.Acquire(ctx, "m.c", "dead", time.Second) // never released
	require.NoError(t, err)
	_, err = leases.Acquire(ctx, "m.c", "alive", time.Second)
	require.ErrorIs(t, err, ErrLeaseHeld)
	require.Eventually(t, func() bool {
		release, err := leases.Acquire(ctx, "m.c", "alive", time.Second)
		if err != nil {
			return false
		}
		release(ctx)
		return true
	}, 10*time.Second, 100*time.Millisecond)
	// A release only gives back its own lease.
	release, err := leases.Acquire(ctx, "m.c", "late", time.Minute)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, "m.c"))
	_, err = leases.Acquire(ctx, "m.c", "next", time.Minute)
	require.NoError(t, err)
	release(ctx)
	_, err = leases.Acquire(ctx, "m.c", "third", time.Minute)
	assert.ErrorIs(t, err, ErrLeaseHeld, "the late holder's release took the next holder's lease")
}

// A lease lives as long as it was given, however long the job's time: the
// bucket has no age bound of its own, which would end a longer lease
// early and let a second worker present the refresh token meanwhile.
func TestRefreshLeaseLastsItsWholeTime(t *testing.T) {
	cfg := spine.Topology{}.RefreshLeases()
	require.Zero(t, cfg.TTL, "an age bound on the bucket would cut leases longer than it")
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	leases := KVLeases{KV: kv}
	ctx := context.Background()
	_, err := leases.Acquire(ctx, "m.c", "first", 3*time.Second)
	require.NoError(t, err)
	time.Sleep(2 * time.Second)
	_, err = leases.Acquire(ctx, "m.c", "second", 3*time.Second)
	require.ErrorIs(t, err, ErrLeaseHeld, "held for its whole time")
}
