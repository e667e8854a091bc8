// Package kvmirror mirrors JetStream key-value buckets of protobuf values
// into memory, kept fresh by watchers, so requests read memory and never wait
// on storage; writes go to the bucket (with compare-and-swap where they can
// race) and return once the mirror has them. Core and billing keep their
// state in such buckets.
package kvmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/wait"
)

// ErrNotFound is returned for a key the bucket does not hold.
var ErrNotFound = errors.New("not found")

// ErrExists is returned by Create for a key the bucket already holds.
var ErrExists = errors.New("already exists")

// ErrConflict is returned when a compare-and-swap lost to another writer too
// many times.
var ErrConflict = errors.New("concurrent update")

// Entry is a decoded value with the revision it was stored at.
type Entry[T proto.Message] struct {
	Value    T
	Revision uint64
}

// Bucket mirrors one key-value bucket of protobuf values in memory. Values
// handed out are shared: callers must not modify them (Modify hands out a
// copy).
type Bucket[T proto.Message] struct {
	kv        jetstream.KeyValue
	newT      func() T
	log       *slog.Logger
	ready     chan struct{}
	readyOnce sync.Once
	// stale asks the follower for a new watcher: a write's revision did not
	// reach the mirror in time (see await).
	stale chan struct{}

	mu      sync.RWMutex
	entries map[string]Entry[T]
	rev     uint64
	changed chan struct{}
	// gen counts the changes applied; it is read without the lock.
	gen atomic.Uint64

	// CatchUp's looks at the bucket: one runs at a time (looking), at most
	// one per lookEvery (lastLook, under looking), and callers that arrive
	// meanwhile share the one that starts next (pending).
	looking  sync.Mutex
	lastLook time.Time
	lookMu   sync.Mutex
	pending  *look
}

// look is one request for the bucket's last revision, shared by the callers
// that arrived before it was sent.
type look struct {
	done chan struct{}
	rev  uint64
	err  error
}

// OpenBucket starts mirroring kv and returns once the current contents are in
// memory. The mirror stays fresh until ctx ends.
func OpenBucket[T proto.Message](ctx context.Context, kv jetstream.KeyValue, newT func() T, log *slog.Logger) (*Bucket[T], error) {
	b := &Bucket[T]{
		kv:      kv,
		newT:    newT,
		log:     log.With("bucket", kv.Bucket()),
		ready:   make(chan struct{}),
		stale:   make(chan struct{}, 1),
		entries: make(map[string]Entry[T]),
		changed: make(chan struct{}),
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", kv.Bucket(), err)
	}
	go b.follow(ctx, w)
	select {
	case <-b.ready:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *Bucket[T]) follow(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.stale:
			// The watcher's consumer may be gone (JetStream restarted, a
			// server of the cluster lost): nats.go would notice only after
			// missing its heartbeats, some seconds on. Watch again from
			// the next revision now.
			nw, err := b.rewatch(ctx)
			if err != nil {
				return
			}
			_ = w.Stop()
			w = nw
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				b.readyOnce.Do(func() { close(b.ready) })
				continue
			}
			b.apply(e)
		}
	}
}

// rewatch starts a watcher from the revision after the mirror's, trying
// again while JetStream cannot answer, until ctx ends.
func (b *Bucket[T]) rewatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	for attempt := 0; ; attempt++ {
		w, err := b.kv.WatchAll(ctx, jetstream.ResumeFromRevision(b.Revision()+1))
		if err == nil {
			b.log.Info("watching again", "from_revision", b.Revision()+1)
			return w, nil
		}
		b.log.Warn("watch again failed", "err", err)
		if !wait.Sleep(ctx, min(time.Duration(attempt+1)*50*time.Millisecond, time.Second)) {
			return nil, ctx.Err()
		}
	}
}

func (b *Bucket[T]) apply(e jetstream.KeyValueEntry) {
	var (
		v   T
		del = e.Operation() != jetstream.KeyValuePut
	)
	if !del {
		v = b.newT()
		if err := proto.Unmarshal(e.Value(), v); err != nil {
			b.log.Error("undecodable value ignored", "key", e.Key(), "revision", e.Revision(), "err", err)
			del = true
		}
	}
	b.mu.Lock()
	if del {
		delete(b.entries, e.Key())
	} else {
		b.entries[e.Key()] = Entry[T]{Value: v, Revision: e.Revision()}
	}
	if e.Revision() > b.rev {
		b.rev = e.Revision()
	}
	b.gen.Add(1)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// Get returns the value under key.
func (b *Bucket[T]) Get(key string) (Entry[T], bool) {
	b.mu.RLock()
	e, ok := b.entries[key]
	b.mu.RUnlock()
	return e, ok
}

// GetBytes is Get for a key held in bytes, which it does not keep: a key
// built on the stack is looked up without being copied to a string.
func (b *Bucket[T]) GetBytes(key []byte) (Entry[T], bool) {
	b.mu.RLock()
	e, ok := b.entries[string(key)]
	b.mu.RUnlock()
	return e, ok
}

// Range calls fn for every entry, in no order, until fn returns false. fn
// must not write to the bucket.
func (b *Bucket[T]) Range(fn func(key string, e Entry[T]) bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for k, e := range b.entries {
		if !fn(k, e) {
			return
		}
	}
}

// Revision is the highest bucket revision the mirror has applied; it grows
// with every write, delete included.
func (b *Bucket[T]) Revision() uint64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.rev
}

// Generation counts the changes the mirror applied, deletes included; it
// never goes back and reads no lock. A cache derived from the entries stays
// valid while the generation it was built at is current: the entries a Range
// after reading the generation sees are at least that new.
func (b *Bucket[T]) Generation() uint64 { return b.gen.Load() }

// CatchUpWait bounds how long CatchUp takes.
const CatchUpWait = time.Second

// lookEvery spaces a bucket's looks: whatever the misses (a flood of
// made-up API keys or model names costs no more), a mirror asks its bucket
// at most 50 times a second, and a real miss waits at most this long more.
const lookEvery = 20 * time.Millisecond

// CatchUp returns once the mirror holds every write the bucket held when it
// was called. A reader that missed a key another process may just have
// written (a connection or an API key created through another core replica
// a moment ago) catches up and looks again, so a key created before a
// request is found by it. (A change or a delete of a key the mirror holds
// reaches it as fast as its watcher, normally within milliseconds: readers
// that find a key do not catch up.) Concurrent callers share one request
// to the bucket. It gives up after CatchUpWait, with the error.
func (b *Bucket[T]) CatchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
	defer cancel()
	b.lookMu.Lock()
	l := b.pending
	if l == nil {
		l = &look{done: make(chan struct{})}
		b.pending = l
		go b.run(l)
	}
	b.lookMu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if l.err != nil {
		return l.err
	}
	return b.await(ctx, l.rev)
}

// run sends look l once the look before it is done; callers arriving from
// then on wait for the next one, since l may not see what they missed.
func (b *Bucket[T]) run(l *look) {
	b.looking.Lock()
	defer b.looking.Unlock()
	if d := lookEvery - time.Since(b.lastLook); d > 0 {
		time.Sleep(d) // callers arriving meanwhile still join l
	}
	b.lastLook = time.Now()
	b.lookMu.Lock()
	b.pending = nil
	b.lookMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), CatchUpWait)
	l.rev, l.err = b.lastRevision(ctx)
	cancel()
	close(l.done)
}

// lastRevision asks the bucket for the revision of its newest message,
// which the mirror has seen or will. A bucket keeps its newest message
// (one value per key: a write replaces older ones, a delete leaves a
// marker) until it expires, and then every older one expired before it: a
// bucket whose messages all expired has nothing to wait for. (Were keys
// given TTLs of their own, the newest message could go first, and a catch
// up would wait out CatchUpWait.)
func (b *Bucket[T]) lastRevision(ctx context.Context) (uint64, error) {
	st, err := b.kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("status of %s: %w", b.kv.Bucket(), err)
	}
	js, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, fmt.Errorf("status of %s: no stream behind it", b.kv.Bucket())
	}
	if state := js.StreamInfo().State; state.Msgs > 0 {
		return state.LastSeq, nil
	}
	return 0, nil
}

// CatchUp catches every bucket up at once (Bucket.CatchUp).
func CatchUp(ctx context.Context, buckets ...interface{ CatchUp(context.Context) error }) error {
	var g errgroup.Group
	for _, b := range buckets {
		g.Go(func() error { return b.CatchUp(ctx) })
	}
	return g.Wait()
}

// Changed returns a channel closed at the next change of the mirror.
func (b *Bucket[T]) Changed() <-chan struct{} {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.changed
}

// Create stores v under a key that must not exist yet.
func (b *Bucket[T]) Create(ctx context.Context, key string, v T) error {
	data, err := proto.Marshal(v)
	if err != nil {
		return err
	}
	rev, err := b.kv.Create(ctx, key, data)
	if LostRace(err) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	return b.await(ctx, rev)
}

// Put stores v under key, whatever was there.
func (b *Bucket[T]) Put(ctx context.Context, key string, v T) error {
	data, err := proto.Marshal(v)
	if err != nil {
		return err
	}
	rev, err := b.kv.Put(ctx, key, data)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return b.await(ctx, rev)
}

// Delete removes key. Deleting a missing key is not an error.
func (b *Bucket[T]) Delete(ctx context.Context, key string) error {
	if err := b.kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	// The delete marker's revision is not returned; wait for the mirror to
	// drop the key instead.
	return b.waitFor(ctx, func() bool { _, ok := b.Get(key); return !ok })
}

// DeleteIf removes key when del reports true for its value, with
// compare-and-swap on that value's revision: a value written since by
// another writer (another replica included) is looked at again, not
// removed unseen. It reports whether it removed the key; a missing key is
// neither removed nor an error. del may be called more than once and must
// not have side effects.
func (b *Bucket[T]) DeleteIf(ctx context.Context, key string, del func(T) bool) (bool, error) {
	for attempt := range modifyAttempts {
		cur, ok := b.Get(key)
		if !ok || !del(cur.Value) {
			return false, nil
		}
		err := b.kv.Delete(ctx, key, jetstream.LastRevision(cur.Revision))
		if err == nil {
			// The delete marker's revision is not returned: wait for the
			// mirror to move past the deleted value instead.
			return true, b.awaitChange(ctx, key, cur.Revision)
		}
		if !LostRace(err) {
			return false, fmt.Errorf("delete %s: %w", key, err)
		}
		if err := b.awaitChange(ctx, key, cur.Revision); err != nil {
			return false, err
		}
		if err := pause(ctx, attempt); err != nil {
			return false, err
		}
	}
	return false, ErrConflict
}

// modifyAttempts bounds Modify's compare-and-swap rounds; with the pauses
// between them a writer gives up only after seconds of losing.
const modifyAttempts = 64

// pause waits a random time that grows with the attempt (at most 20 ms).
func pause(ctx context.Context, attempt int) error {
	if !wait.Sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt+1, 20))*int64(time.Millisecond)))) {
		return ctx.Err()
	}
	return nil
}

// Modify applies fn to a copy of the value under key and stores the result
// with compare-and-swap, retrying when another writer got there first. fn may
// be called more than once and must not have side effects.
func (b *Bucket[T]) Modify(ctx context.Context, key string, fn func(T) error) (T, error) {
	var zero T
	for attempt := range modifyAttempts {
		cur, ok := b.Get(key)
		if !ok {
			return zero, ErrNotFound
		}
		next := proto.Clone(cur.Value).(T)
		if err := fn(next); err != nil {
			return zero, err
		}
		data, err := proto.Marshal(next)
		if err != nil {
			return zero, err
		}
		rev, err := b.kv.Update(ctx, key, data, cur.Revision)
		if err != nil {
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				// Someone else wrote first: wait until the mirror has it, then retry.
				if err := b.awaitChange(ctx, key, cur.Revision); err != nil {
					return zero, err
				}
				// Under contention the same writer can lose many rounds in
				// a row; a growing random pause lets the others finish.
				if err := pause(ctx, attempt); err != nil {
					return zero, err
				}
				continue
			}
			return zero, fmt.Errorf("update %s: %w", key, err)
		}
		return next, b.await(ctx, rev)
	}
	return zero, ErrConflict
}

// staleAfter is how long a write's change may take to reach the mirror
// before the watcher is taken for lost and replaced (see waitFor).
const staleAfter = time.Second

// await blocks until the mirror has seen revision rev, so a caller reads its
// own writes.
func (b *Bucket[T]) await(ctx context.Context, rev uint64) error {
	return b.waitFor(ctx, func() bool { return b.Revision() >= rev })
}

// waitFor blocks until done reports true, looked at on each change of the
// mirror. A wait longer than staleAfter makes the follower watch again:
// through a live watcher a write's change came 9 us after the put at the
// median, 96 us at p99 and 1 ms at most (2,000 puts on an embedded server,
// 2 cores), while a lost watcher was noticed by nats.go only after about
// 17 s of missed heartbeats (after a JetStream restart).
func (b *Bucket[T]) waitFor(ctx context.Context, done func() bool) error {
	var late <-chan time.Time
	for {
		ch := b.Changed()
		if done() {
			return nil
		}
		if late == nil {
			t := time.NewTimer(staleAfter)
			defer t.Stop()
			late = t.C
		}
		select {
		case <-ch:
		case <-late:
			select {
			case b.stale <- struct{}{}:
			default:
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// awaitChange blocks until key's revision in the mirror differs from rev.
func (b *Bucket[T]) awaitChange(ctx context.Context, key string, rev uint64) error {
	return b.waitFor(ctx, func() bool { e, ok := b.Get(key); return !ok || e.Revision != rev })
}

// LostRace reports whether err is a write that lost a compare-and-swap: a
// Create of a key that exists, an Update or a Delete at a revision that is
// no longer the key's. NATS reports it with code 10071 on one server and
// may use 10164 on replicated streams; nats.go maps the latter to neither
// of its errors when a Create finds a delete marker and retries over it.
func LostRace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// ErrSkip, returned by an Upsert function, leaves the stored value as it is.
var ErrSkip = errors.New("skip")

// Upsert stores fn's result under key with compare-and-swap: fn gets a copy
// of the current value (ok true) or a new zero value (ok false) to fill.
// Lost races are retried; fn may run more than once and must not have side
// effects. When fn returns ErrSkip nothing is written and the current value
// is returned.
func (b *Bucket[T]) Upsert(ctx context.Context, key string, fn func(v T, ok bool) error) (T, error) {
	var zero T
	for attempt := range modifyAttempts {
		cur, ok := b.Get(key)
		var next T
		if ok {
			next = proto.Clone(cur.Value).(T)
		} else {
			next = b.newT()
		}
		if err := fn(next, ok); err != nil {
			if errors.Is(err, ErrSkip) {
				if ok {
					return cur.Value, nil
				}
				return zero, ErrNotFound
			}
			return zero, err
		}
		data, err := proto.Marshal(next)
		if err != nil {
			return zero, err
		}
		var rev uint64
		if ok {
			rev, err = b.kv.Update(ctx, key, data, cur.Revision)
		} else {
			rev, err = b.kv.Create(ctx, key, data)
		}
		if err != nil {
			if LostRace(err) {
				if ok {
					if err := b.awaitChange(ctx, key, cur.Revision); err != nil {
						return zero, err
					}
				} else if err := b.awaitPresent(ctx, key); err != nil {
					return zero, err
				}
				if err := pause(ctx, attempt); err != nil {
					return zero, err
				}
				continue
			}
			return zero, fmt.Errorf("upsert %s: %w", key, err)
		}
		return next, b.await(ctx, rev)
	}
	return zero, ErrConflict
}

// awaitPresent blocks until key is in the mirror.
func (b *Bucket[T]) awaitPresent(ctx context.Context, key string) error {
	return b.waitFor(ctx, func() bool { _, ok := b.Get(key); return ok })
}
