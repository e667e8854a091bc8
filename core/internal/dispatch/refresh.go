package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/store"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// RefreshWait bounds how long a request waits for a token refresh.
const RefreshWait = 15 * time.Second

// ErrNeedsRelogin is returned when a connection's refresh token was refused
// for good.
var ErrNeedsRelogin = errors.New("connection needs a new login")

var _ credential.Refresher = (*Dispatcher)(nil)

// errRefreshFailed is a refresh recorded as failed without needing a new
// login: the connection is passed over for this request.
var errRefreshFailed = errors.New("token refresh failed")

// refresh has a worker refresh a connection's OAuth token and waits, bounded,
// until the refreshed connection is in the store. Concurrent calls for one
// connection and token generation share one job.
func (d *Dispatcher) refresh(ctx context.Context, c credential.Candidate) (credential.Candidate, error) {
	conn, ok := c.Value.(*Conn)
	if !ok {
		return c, errors.New("not a dispatch candidate")
	}
	cur := conn.Connection
	gen := cur.GetOauth().GetGeneration()
	key := store.ConnectionKey(cur.GetMachineId(), cur.GetId())
	start, _ := d.store.Connections.Get(key)
	queued, err := d.jobs.QueueTokenRefresh(ctx, cur.GetMachineId(), cur.GetId(), gen)
	if err != nil {
		return c, fmt.Errorf("enqueue token refresh: %w", err)
	}
	// The generation's job ran and failed already (another model of the
	// connection asked first), and the queue dropped this one as its copy:
	// no refresh is coming, so the request moves on at once instead of
	// waiting RefreshWait for one.
	if !queued && failedAt(start.Value, gen) {
		return c, errRefreshFailed
	}
	// A failure recorded at this generation before the wait began is an
	// earlier refresh's (its job out of the de-duplication window, so this
	// one was queued anew): the connection carries its error through any
	// write, and only a write recording a failure again is this refresh's
	// outcome.
	stale := failedAt(start.Value, gen)
	prev := start
	timer := time.NewTimer(d.refreshWait)
	defer timer.Stop()
	for {
		changed := d.store.Connections.Changed()
		e, ok := d.store.Connections.Get(key)
		if !ok {
			return c, errors.New("connection was removed")
		}
		if e.Value.GetOauth().GetNeedsRelogin() {
			return c, ErrNeedsRelogin
		}
		// A refresh that failed without needing a new login is recorded at
		// the same generation: no point waiting for it.
		if e.Revision != prev.Revision && failedAt(e.Value, gen) && (!stale || recordsFailure(prev.Value, e.Value)) {
			return c, errRefreshFailed
		}
		prev = e
		if e.Value.GetOauth().GetGeneration() > gen {
			next, err := d.Prepare(e.Value, conn.Spec)
			if err != nil {
				return c, err
			}
			c.Value = next
			return c, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return c, errors.New("token refresh did not finish in time")
		case <-ctx.Done():
			return c, ctx.Err()
		}
	}
}

// failedAt reports whether c records a failed refresh at token generation
// gen.
func failedAt(c *busv1.Connection, gen uint64) bool {
	return c.GetOauth().GetLastError() != "" && c.GetOauth().GetGeneration() == gen
}

// recordsFailure reports whether the write from before to after is a
// refresh failure being recorded: the refresh's outcome (its error and
// when, whether a new login is needed) and the time of the change are all
// it changed. A connection test (its result, no edit), an edit, a cooldown
// or the refreshed tokens change something else, or not the time.
func recordsFailure(before, after *busv1.Connection) bool {
	if proto.Equal(before.GetUpdatedAt(), after.GetUpdatedAt()) {
		return false
	}
	b, a := proto.CloneOf(before), proto.CloneOf(after)
	for _, c := range []*busv1.Connection{b, a} {
		c.UpdatedAt = nil
		if c.Oauth != nil {
			c.Oauth.LastError, c.Oauth.LastErrorAt, c.Oauth.NeedsRelogin = "", nil, false
		}
	}
	return proto.Equal(b, a)
}
