package kvmirror

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

func newBucket(t *testing.T) (jetstream.KeyValue, func() *Bucket[*busv1.Settings]) {
	t.Helper()
	return newBucketOf(t, jetstream.KeyValueConfig{Bucket: "test"})
}

func newBucketOf(t *testing.T, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, func() *Bucket[*busv1.Settings]) {
	t.Helper()
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kv, err := js.CreateKeyValue(ctx, cfg)
	require.NoError(t, err)
	open := func() *Bucket[*busv1.Settings] {
		b, err := OpenBucket(ctx, kv, func() *busv1.Settings { return new(busv1.Settings) }, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		return b
	}
	return kv, open
}

// Two mirrors of one bucket (two core replicas) see each other's writes, and
// a writer reads its own write at once.
func TestMirrorsFollowEachOther(t *testing.T) {
	_, open := newBucket(t)
	a, b := open(), open()
	ctx := context.Background()
	require.NoError(t, a.Create(ctx, "m1", &busv1.Settings{CavemanLevel: "lite"}))
	got, ok := a.Get("m1")
	require.True(t, ok, "read your own write")
	assert.Equal(t, "lite", got.Value.GetCavemanLevel())

	require.Eventually(t, func() bool { _, ok := b.Get("m1"); return ok }, timeout, tick)
	assert.ErrorIs(t, b.Create(ctx, "m1", &busv1.Settings{}), ErrExists)

	require.NoError(t, b.Delete(ctx, "m1"))
	require.Eventually(t, func() bool { _, ok := a.Get("m1"); return !ok }, timeout, tick)
}

// Concurrent read-modify-writes from two replicas lose no update.
func TestModifyIsCompareAndSwap(t *testing.T) {
	_, open := newBucket(t)
	a, b := open(), open()
	ctx := context.Background()
	require.NoError(t, a.Create(ctx, "counter", &busv1.Settings{}))
	require.Eventually(t, func() bool { _, ok := b.Get("counter"); return ok }, timeout, tick)

	const each = 20
	var wg sync.WaitGroup
	for _, bucket := range []*Bucket[*busv1.Settings]{a, b} {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					_, err := bucket.Modify(ctx, "counter", func(s *busv1.Settings) error {
						s.StickyLimit++
						return nil
					})
					assert.NoError(t, err)
				}
			}()
		}
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		e, _ := a.Get("counter")
		return e.Value.GetStickyLimit() == 4*each
	}, timeout, tick)
	_, err := a.Modify(ctx, "missing", func(*busv1.Settings) error { return nil })
	assert.ErrorIs(t, err, ErrNotFound)
}

// A mirror opened later starts from the bucket's current contents.
func TestOpenLoadsExistingState(t *testing.T) {
	kv, open := newBucket(t)
	_, err := kv.Put(context.Background(), "m2", mustMarshal(t, &busv1.Settings{RoutingStrategy: "round-robin"}))
	require.NoError(t, err)
	b := open()
	e, ok := b.Get("m2")
	require.True(t, ok)
	assert.Equal(t, "round-robin", e.Value.GetRoutingStrategy())
}

// The generation moves with every change the mirror applies, a delete
// included, and the change is in the mirror when the write returns.
func TestGenerationMovesWithEveryChange(t *testing.T) {
	_, open := newBucket(t)
	b := open()
	ctx := context.Background()
	g0 := b.Generation()
	require.NoError(t, b.Put(ctx, "m1", &busv1.Settings{CavemanLevel: "lite"}))
	g1 := b.Generation()
	assert.Greater(t, g1, g0)
	_, err := b.Modify(ctx, "m1", func(s *busv1.Settings) error { s.CavemanLevel = "full"; return nil })
	require.NoError(t, err)
	g2 := b.Generation()
	assert.Greater(t, g2, g1)
	require.NoError(t, b.Delete(ctx, "m1"))
	assert.Greater(t, b.Generation(), g2)
}

// A write another process made (straight to the bucket, as another core
// replica does) is in the mirror once CatchUp returns, for every one of
// many writers catching up at once: none of them is answered by a look at
// the bucket that was sent before its write.
func TestCatchUpHoldsWritesMadeElsewhere(t *testing.T) {
	kv, open := newBucket(t)
	b := open()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				key := fmt.Sprintf("w%d-%d", w, i)
				_, err := kv.Put(ctx, key, mustMarshal(t, &busv1.Settings{CavemanLevel: key}))
				if !assert.NoError(t, err) {
					return
				}
				if !assert.NoError(t, b.CatchUp(ctx)) {
					return
				}
				e, ok := b.Get(key)
				if assert.True(t, ok, "%s is in the mirror after CatchUp", key) {
					assert.Equal(t, key, e.Value.GetCavemanLevel())
				}
			}
		}()
	}
	wg.Wait()
}

// A mirror opened after the bucket's last message expired does not wait
// for that message: CatchUp returns at once instead of timing out.
func TestCatchUpAfterTheLastMessageExpired(t *testing.T) {
	kv, open := newBucketOf(t, jetstream.KeyValueConfig{Bucket: "expiring", TTL: 200 * time.Millisecond})
	ctx := context.Background()
	_, err := kv.Put(ctx, "gone", mustMarshal(t, &busv1.Settings{}))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := kv.Status(ctx)
		return err == nil && st.Values() == 0
	}, timeout, tick, "the message expires")
	b := open()
	require.NoError(t, b.CatchUp(ctx), "catches up without waiting out CatchUpWait")
	_, ok := b.Get("gone")
	assert.False(t, ok)
}

// A lost compare-and-swap is recognised whichever code NATS reports it
// with, wrapped or not; other errors are not one.
func TestLostRace(t *testing.T) {
	for _, err := range []error{
		jetstream.ErrKeyExists, jetstream.ErrKeyRevisionMismatch,
		&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence},
		fmt.Errorf("update: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}),
	} {
		assert.True(t, LostRace(err), "%v", err)
	}
	for _, err := range []error{nil, jetstream.ErrKeyNotFound, context.DeadlineExceeded, &jetstream.APIError{Code: 503, ErrorCode: 10008}} {
		assert.False(t, LostRace(err), "%v", err)
	}
}

// A flood of catch-ups (every request with a made-up key or model misses)
// asks the bucket at most once per lookEvery, and each still returns.
func TestCatchUpFloodIsSpaced(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "flood"})
	require.NoError(t, err)
	b, err := OpenBucket(ctx, kv, func() *busv1.Settings { return new(busv1.Settings) }, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	apiRequests := func() uint64 {
		info, err := js.AccountInfo(ctx)
		require.NoError(t, err)
		return info.API.Total
	}
	before := apiRequests()
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 200*time.Millisecond {
				assert.NoError(t, b.CatchUp(ctx))
			}
		}()
	}
	wg.Wait()
	looks := apiRequests() - before - 1 // less the count's own request
	assert.Positive(t, looks)
	assert.LessOrEqual(t, looks, uint64(time.Since(start)/lookEvery)+2, "looks at the bucket in %s", time.Since(start))
}

// A watcher whose consumer is gone without a word (JetStream restarted
// under it after a full disk) would be noticed by nats.go only after its
// missed heartbeats, some seconds on; meanwhile every write waited for its
// own revision. A write that does not reach the mirror within a second
// makes the mirror watch again from its revision, and missed changes come
// in.
func TestMirrorWatchesAgainWhenItsWatcherIsLost(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test"})
	require.NoError(t, err)
	b, err := OpenBucket(ctx, kv, func() *busv1.Settings { return new(busv1.Settings) }, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, b.Put(ctx, "m1", &busv1.Settings{CavemanLevel: "lite"}))

	// Stop the watcher's consumer without telling the client: paused, it
	// delivers nothing, as a consumer gone with a restarted JetStream.
	stream, err := js.Stream(ctx, "KV_test")
	require.NoError(t, err)
	names := stream.ConsumerNames(ctx)
	var paused int
	for name := range names.Name() {
		_, err := stream.PauseConsumer(ctx, name, time.Now().Add(time.Hour))
		require.NoError(t, err)
		paused++
	}
	require.NoError(t, names.Err())
	require.Equal(t, 1, paused, "the mirror's watcher")

	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	// A delete, whose marker's revision is not known, waits for the key to
	// go; a put, for its revision.
	require.NoError(t, b.Delete(wctx, "m1"), "the delete reaches the mirror")
	require.NoError(t, b.Put(wctx, "m2", &busv1.Settings{CavemanLevel: "full"}), "the write reaches the mirror")
	t.Logf("a delete and a write through a lost watcher returned after %s", time.Since(start).Round(time.Millisecond))
	_, err = kv.Put(ctx, "m3", mustMarshal(t, &busv1.Settings{CavemanLevel: "ultra"}))
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := b.Get("m3"); return ok }, timeout, tick, "another writer's change comes in")
	_, ok := b.Get("m1")
	assert.False(t, ok, "the deleted key is gone")
	got, ok := b.Get("m2")
	require.True(t, ok)
	assert.Equal(t, "full", got.Value.GetCavemanLevel())
}

// DeleteIf removes a value only while it is the one its caller judged: a
// value written since through the bucket itself (another replica) stays,
// whether or not the deleting mirror has seen it yet.
func TestDeleteIfLeavesANewerValue(t *testing.T) {
	kv, open := newBucket(t)
	a := open()
	ctx := context.Background()
	isLite := func(s *busv1.Settings) bool { return s.GetCavemanLevel() == "lite" }

	require.NoError(t, a.Put(ctx, "m1", &busv1.Settings{CavemanLevel: "lite"}))
	for range 20 {
		// Another replica replaces the value; a may not have it yet.
		_, err := kv.Put(ctx, "m1", mustMarshal(t, &busv1.Settings{CavemanLevel: "ultra"}))
		require.NoError(t, err)
		deleted, err := a.DeleteIf(ctx, "m1", isLite)
		require.NoError(t, err)
		assert.False(t, deleted, "the newer value was deleted")
		_, err = kv.Get(ctx, "m1")
		require.NoError(t, err, "the newer value is gone")
		require.NoError(t, a.Put(ctx, "m1", &busv1.Settings{CavemanLevel: "lite"}))
	}

	deleted, err := a.DeleteIf(ctx, "m1", isLite)
	require.NoError(t, err)
	assert.True(t, deleted)
	_, ok := a.Get("m1")
	assert.False(t, ok, "read your own delete")
	deleted, err = a.DeleteIf(ctx, "m1", isLite)
	require.NoError(t, err)
	assert.False(t, deleted, "a missing key")
}
