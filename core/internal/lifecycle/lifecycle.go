// Package lifecycle keeps OAuth connections' tokens alive with no request
// arriving: a periodic scan of core's connection mirror enqueues a token
// refresh job for each connection whose access token is within its
// provider's lead time of expiring (or, for providers that ask for it, whose
// last refresh is too old). The job is the one a 401 enqueues (one per
// connection and token generation), so a proactive and a reactive refresh of
// one token are one job, and every core replica may scan at once.
//
// The scan lives in core rather than in the workers because core holds the
// connection mirror: workers would need a listing RPC and a copy of every
// connection's lifecycle state to do the same.
package lifecycle

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// DefaultScanEvery is how often the scan runs when not configured.
const DefaultScanEvery = time.Minute

// FailureBackoff is how long a connection whose last refresh failed (and was
// recorded at its current generation) waits before a proactive retry. A
// request refused with 401 still refreshes reactively in the meantime.
const FailureBackoff = 10 * time.Minute

// Enqueuer publishes token refresh jobs, de-duplicated per connection and
// token generation (core/internal/jobs.Publisher).
type Enqueuer interface {
	TokenRefresh(ctx context.Context, machineID, connectionID string, generation uint64) error
}

// Scheduler finds connections whose tokens are due for a refresh.
type Scheduler struct {
	conns *kvmirror.Bucket[*busv1.Connection]
	// lookup finds a provider's spec (provider.Registry.Lookup).
	lookup func(id string) (provider.Spec, bool)
	jobs   Enqueuer
	log    *slog.Logger
	now    func() time.Time
}

// New returns a Scheduler over core's connection mirror.
func New(conns *kvmirror.Bucket[*busv1.Connection], reg *provider.Registry, jobs Enqueuer, log *slog.Logger) *Scheduler {
	return &Scheduler{conns: conns, lookup: reg.Lookup, jobs: jobs, log: log, now: time.Now}
}

// Due reports whether a connection's token should be refreshed now, and why.
// Only active OAuth connections that can be refreshed (a token URL, no
// pending re-login) are ever due.
func (s *Scheduler) Due(c *busv1.Connection, now time.Time) (bool, string) {
	o := c.GetOauth()
	if o == nil || !c.GetIsActive() || o.GetNeedsRelogin() || o.GetTokenUrl() == "" {
		return false, ""
	}
	if o.GetLastError() != "" && now.Sub(c.GetUpdatedAt().AsTime()) < FailureBackoff {
		return false, ""
	}
	spec, ok := s.lookup(c.GetProvider())
	if !ok {
		return false, ""
	}
	lead, maxAge := spec.TokenRefresh()
	if r, e := o.GetRefreshedAt(), o.GetExpiresAt(); r != nil && e != nil {
		// A refreshed token that lives shorter than the provider's lead
		// (hour-long tokens where the table leads by four) is refreshed
		// halfway through its life: with the lead, every scan would find it
		// due again, a refresh a minute. A login records its tokens'
		// issue too; an imported token keeps the lead: when it was issued
		// is not known.
		if life := e.AsTime().Sub(r.AsTime()); life > 0 {
			lead = min(lead, life/2)
		}
	}
	if o.GetExpiresAt() != nil && !o.GetExpiresAt().AsTime().After(now.Add(lead)) {
		return true, "expiring"
	}
	if maxAge > 0 && now.Sub(lastRefresh(c)) > maxAge {
		return true, "max_age"
	}
	return false, ""
}

// lastRefresh is when the connection's tokens last changed: the time core
// stored its last refresh, else (no refresh stored yet, or one stored by
// an earlier release) its last update, which is never earlier than the
// last refresh and so can only delay a forced refresh, never repeat one.
func lastRefresh(c *busv1.Connection) time.Time {
	if t := c.GetOauth().GetRefreshedAt(); t != nil {
		return t.AsTime()
	}
	if t := c.GetUpdatedAt(); t != nil {
		return t.AsTime()
	}
	return c.GetCreatedAt().AsTime()
}

// Scan enqueues a refresh for every due connection and returns how many
// jobs it published (duplicates the queue drops included).
func (s *Scheduler) Scan(ctx context.Context) int {
	now := s.now()
	type due struct {
		machineID, id, reason string
		generation            uint64
	}
	var list []due
	s.conns.Range(func(_ string, e kvmirror.Entry[*busv1.Connection]) bool {
		c := e.Value
		if ok, reason := s.Due(c, now); ok {
			list = append(list, due{c.GetMachineId(), c.GetId(), reason, c.GetOauth().GetGeneration()})
		}
		return true
	})
	n := 0
	for _, d := range list {
		if err := s.jobs.TokenRefresh(ctx, d.machineID, d.id, d.generation); err != nil {
			if ctx.Err() != nil {
				return n
			}
			s.log.Warn("proactive token refresh not enqueued", "connection", d.id, "err", err)
			continue
		}
		s.log.Debug("proactive token refresh enqueued", "connection", d.id, "machine", d.machineID,
			"generation", d.generation, "reason", d.reason)
		n++
	}
	return n
}

// Run scans every interval until ctx ends.
func (s *Scheduler) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultScanEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// A replica that was down may find tokens already due.
	s.Scan(ctx)
	for {
		select {
		case <-t.C:
			if n := s.Scan(ctx); n > 0 {
				s.log.Debug("proactive token refreshes enqueued", "count", n)
			}
		case <-ctx.Done():
			return
		}
	}
}
