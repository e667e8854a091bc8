// Package catalog builds a machine's model listing from its connections: the
// registry's static models, a connection's enabled models, and the live
// catalogs that workers fetch from compatible upstreams.
package catalog

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// FetchWait is how long a listing waits for missing live catalogs
// (interface section 8).
const FetchWait = 5 * time.Second

// Refresher enqueues catalog fetches.
type Refresher interface {
	CatalogRefresh(ctx context.Context, machineID, connectionID, dedupKey string) error
}

// Model is one listed model.
type Model struct {
	// ID is "<prefix-or-provider>/<model>".
	ID      string
	OwnedBy string
	Kind    string
}

// Lister answers model listings.
type Lister struct {
	store     *store.Store
	registry  *provider.Registry
	refresher Refresher
	wait      time.Duration
	now       func() time.Time
	log       *slog.Logger
}

// NewLister returns a Lister.
func NewLister(st *store.Store, reg *provider.Registry, r Refresher, log *slog.Logger) *Lister {
	return &Lister{store: st, registry: reg, refresher: r, wait: FetchWait, now: time.Now, log: log}
}

// Options narrow a listing.
type Options struct {
	// Kind lists only models of that kind.
	Kind string
	// NoFetch lists without live catalogs that are not already stored; set
	// for requests from another instance's catalog fetch, so two instances
	// never recurse.
	NoFetch bool
}

// List returns the models machineID can reach. A compatible connection
// whose live catalog is missing or stale gets a refresh job; List waits up to
// FetchWait for those, then answers without the ones still missing.
func (l *Lister) List(ctx context.Context, machineID string, opts Options) []Model {
	conns := l.activeConnections(machineID)
	if !opts.NoFetch {
		if pending := l.requestMissing(ctx, conns); len(pending) > 0 {
			l.awaitCatalogs(ctx, pending)
		}
	}
	seen := make(map[string]bool)
	var out []Model
	add := func(m Model) {
		if opts.Kind != "" && m.Kind != opts.Kind {
			return
		}
		if seen[m.ID] {
			return
		}
		seen[m.ID] = true
		out = append(out, m)
	}
	for _, c := range conns {
		spec, ok := l.registry.Lookup(c.GetProvider())
		if !ok {
			continue
		}
		alias := c.GetData().GetPrefix()
		if alias == "" {
			alias = spec.Alias
		}
		static := make(map[string]provider.Model, len(spec.Models))
		for _, m := range spec.Models {
			static[m.ID] = m
		}
		kindOf := func(id string) string {
			if m, ok := static[id]; ok {
				return provider.KindOf(m.Kind, "", id)
			}
			return provider.GuessKind(id)
		}
		switch {
		case len(c.GetData().GetEnabledModels()) > 0:
			for _, id := range c.GetData().GetEnabledModels() {
				add(Model{ID: alias + "/" + id, OwnedBy: alias, Kind: kindOf(id)})
			}
		case spec.Family != "":
			cat, ok := l.fresh(c)
			if !ok {
				continue
			}
			for _, m := range cat.GetModels() {
				add(Model{ID: alias + "/" + m.GetId(), OwnedBy: alias, Kind: provider.KindOf(m.GetKind(), m.GetType(), m.GetId())})
			}
		default:
			for _, m := range spec.Models {
				add(Model{ID: alias + "/" + m.ID, OwnedBy: alias, Kind: provider.KindOf(m.Kind, "", m.ID)})
			}
		}
	}
	return out
}

func (l *Lister) activeConnections(machineID string) []*busv1.Connection {
	all := l.store.MachineConnections(machineID)
	out := all[:0:0]
	for _, c := range all {
		if c.GetIsActive() {
			out = append(out, c)
		}
	}
	return out
}

// needsFetch reports whether a connection's models come from a live catalog
// that may be fetched (interface 4.2 rules 4 and 6).
func (l *Lister) needsFetch(c *busv1.Connection) bool {
	spec, ok := l.registry.Lookup(c.GetProvider())
	return ok && spec.Family != "" && len(c.GetData().GetEnabledModels()) == 0 && !provider.CrossInstance(c.GetProvider())
}

// fresh returns the connection's stored catalog if it has not expired.
func (l *Lister) fresh(c *busv1.Connection) (*busv1.Catalog, bool) {
	e, ok := l.store.Catalogs.Get(store.ConnectionKey(c.GetMachineId(), c.GetId()))
	if !ok || !l.now().Before(e.Value.GetExpiresAt().AsTime()) {
		return nil, false
	}
	return e.Value, true
}

// requestMissing enqueues a refresh for every fetchable connection without a
// fresh catalog and returns their keys.
func (l *Lister) requestMissing(ctx context.Context, conns []*busv1.Connection) map[string]bool {
	var pending map[string]bool
	for _, c := range conns {
		if !l.needsFetch(c) {
			continue
		}
		if _, ok := l.fresh(c); ok {
			continue
		}
		key := store.ConnectionKey(c.GetMachineId(), c.GetId())
		// One job per stale catalog revision: concurrent listings share it.
		var rev uint64
		if e, ok := l.store.Catalogs.Get(key); ok {
			rev = e.Revision
		}
		if err := l.refresher.CatalogRefresh(ctx, c.GetMachineId(), c.GetId(), strconv.FormatUint(rev, 10)); err != nil {
			l.log.Warn("catalog refresh not enqueued", "connection", c.GetId(), "err", err)
			continue
		}
		if pending == nil {
			pending = make(map[string]bool)
		}
		pending[key] = true
	}
	return pending
}

// awaitCatalogs waits until every pending catalog is fresh, at most FetchWait.
func (l *Lister) awaitCatalogs(ctx context.Context, pending map[string]bool) {
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	for {
		changed := l.store.Catalogs.Changed()
		for key := range pending {
			if e, ok := l.store.Catalogs.Get(key); ok && l.now().Before(e.Value.GetExpiresAt().AsTime()) {
				delete(pending, key)
			}
		}
		if len(pending) == 0 {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
