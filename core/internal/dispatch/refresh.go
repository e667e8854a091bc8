package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/store"
)

// RefreshWait bounds how long a request waits for a token refresh.
const RefreshWait = 15 * time.Second

// ErrNeedsRelogin is returned when a connection's refresh token was refused
// for good.
var ErrNeedsRelogin = errors.New("connection needs a new login")

var _ credential.Refresher = (*Dispatcher)(nil)

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
	if err := d.jobs.TokenRefresh(ctx, cur.GetMachineId(), cur.GetId(), gen); err != nil {
		return c, fmt.Errorf("enqueue token refresh: %w", err)
	}
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
		if e.Revision != start.Revision && e.Value.GetOauth().GetLastError() != "" && e.Value.GetOauth().GetGeneration() == gen {
			return c, errors.New("token refresh failed")
		}
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
