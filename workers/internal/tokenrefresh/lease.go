package tokenrefresh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
)

// Leases keep the refresh of one connection to one worker process at a
// time, across processes (within one, Refresher shares a refresh between
// its jobs).
type Leases interface {
	// Acquire takes key's lease for holder, for at most ttl (the holder may
	// die). It answers ErrLeaseHeld while another holder has it, and
	// release, which gives it back.
	Acquire(ctx context.Context, key, holder string, ttl time.Duration) (release func(context.Context), err error)
}

const (
	// releaseTimeout bounds giving a lease back.
	releaseTimeout = 5 * time.Second
	// minLeaseTTL is the shortest lease (the server counts TTLs in
	// seconds).
	minLeaseTTL = time.Second
	// leaseMargin is what a lease outlasts its job's deadline by; the job
	// is redelivered 10 s after that deadline, when the lease of a worker
	// that died with it is gone.
	leaseMargin = 2 * time.Second
)

// ErrLeaseHeld is Acquire's answer while another worker refreshes the
// connection: the job is retried, and by then finds the refresh done.
var ErrLeaseHeld = errors.New("another worker is refreshing this connection")

// KVLeases are leases in a key-value bucket with per-key TTLs
// (spine.BucketRefreshLeases): a worker that died holding one holds it no
// longer than its job could have run.
type KVLeases struct {
	KV jetstream.KeyValue
	// JS reaches the bucket's leader (Pending); nil takes the bucket's
	// answer.
	JS jetstream.JetStream
}

// Acquire implements Leases: a create, which only one of several
// concurrent callers wins, and a release that deletes the key only if it is
// still the one this holder created.
func (l KVLeases) Acquire(ctx context.Context, key, holder string, ttl time.Duration) (func(context.Context), error) {
	rev, err := l.KV.Create(ctx, key, []byte(holder), jetstream.KeyTTL(max(ttl, minLeaseTTL).Round(time.Second)))
	if kvmirror.LostRace(err) {
		return nil, ErrLeaseHeld
	}
	if err != nil {
		return nil, fmt.Errorf("take the refresh lease: %w", err)
	}
	return func(ctx context.Context) {
		// Released even when the job's own time ran out; left behind, the
		// bucket's TTL frees it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_ = l.KV.Delete(ctx, key, jetstream.LastRevision(rev))
	}, nil
}
