// Package catalog builds a machine's model listing from its connections: the
// registry's static models, a connection's enabled models, the live catalogs
// that workers fetch from upstreams, and the machine's aliases and combos,
// less its disabled models.
package catalog

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// FetchWait is how long a listing waits for missing live catalogs
// (interface section 8).
const FetchWait = 5 * time.Second

// Owners of entries that are not a connection's models.
const (
	OwnerCombo = "combo"
	OwnerAlias = "alias"
)

// Refresher enqueues catalog fetches.
type Refresher interface {
	CatalogRefresh(ctx context.Context, machineID, connectionID, dedupKey string) error
}

// Model is one listed model.
type Model struct {
	// ID is "<prefix-or-provider>/<model>", an alias or a combo name.
	ID      string
	OwnedBy string
	Kind    string
	// Provider is the provider id of the connection serving it (empty for a
	// combo).
	Provider      string
	Name          string
	ContextWindow int
	Dimensions    int
	Input         []string
	Output        []string
	// Created is when the model was made, in Unix seconds, as its live
	// catalog says (an alias's, its target's); 0 when none says.
	Created int64
}

// Lister answers model listings.
type Lister struct {
	store    *store.Store
	registry *provider.Registry
	// resolver is the router's: a combo is listed when it resolves.
	resolver  *routing.Resolver
	refresher Refresher
	wait      time.Duration
	now       func() time.Time
	log       *slog.Logger

	mu     sync.Mutex
	cache  map[cacheKey]*cachedListing
	builds singleflight.Group
	// building, when set (tests), runs as a listing starts being built.
	building func()
}

// cacheTTL bounds how long a built listing is reused while nothing it was
// built from changed. The one thing that changes with time alone, a live
// catalog's expiry, ends a listing's reuse by itself (cachedListing.until):
// this is only a ceiling.
const cacheTTL = time.Minute

type cacheKey struct {
	machine, kind string
	noFetch       bool
}

type cachedListing struct {
	version [4]uint64
	// until is when the listing stops being reused: cacheTTL after it was
	// built, or sooner when a live catalog it lists expires then.
	until  time.Time
	models []Model
	// kept: the listing is in the cache (else it was answered only).
	kept bool
	// rendered is Render's value of a kept listing, made once.
	renderOnce sync.Once
	rendered   any
}

// version identifies the state a listing is built from.
func (l *Lister) version() [4]uint64 {
	return [4]uint64{l.store.Connections.Revision(), l.store.Catalogs.Revision(), l.store.Settings.Revision(), l.store.Disabled.Revision()}
}

// NewLister returns a Lister.
func NewLister(st *store.Store, reg *provider.Registry, r Refresher, log *slog.Logger) *Lister {
	return &Lister{store: st, registry: reg, resolver: routing.NewResolver(st, reg), refresher: r, wait: FetchWait, now: time.Now, log: log}
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

// List returns the models machineID can reach: combos first, then each
// usable connection's models by priority, then aliases. A connection the
// router would refuse (switched off, or needing a new login) lists nothing,
// and a combo is listed only when one of its models resolves, so every
// model listed is one a request may name. A connection whose
// live catalog is missing or stale gets a refresh job; List waits up to
// FetchWait for those, then answers without the ones still missing.
//
// A listing built when every live catalog it needs was at hand is reused
// while nothing it was built from changes and none of those catalogs
// expired, so a machine with thousands of models answers from memory
// without rebuilding. The returned slice is shared: callers must not
// modify it.
func (l *Lister) List(ctx context.Context, machineID string, opts Options) []Model {
	models, _ := l.list(ctx, machineID, opts)
	return models
}

// Render returns render's value of the listing List answers: made once for
// a listing that is kept and answered again with it (callers share it:
// read-only), made on each call for one that is not. Every call of a
// Lister's Render must pass a render making the same value (core's
// listing answer).
func (l *Lister) Render(ctx context.Context, machineID string, opts Options, render func([]Model) any) any {
	models, kept := l.list(ctx, machineID, opts)
	if kept == nil {
		return render(models)
	}
	kept.renderOnce.Do(func() { kept.rendered = render(models) })
	return kept.rendered
}

// list is List's listing, and where it is kept (nil: not kept).
func (l *Lister) list(ctx context.Context, machineID string, opts Options) ([]Model, *cachedListing) {
	key := cacheKey{machine: machineID, kind: opts.Kind, noFetch: opts.NoFetch}
	ver := l.version()
	if c := l.cached(key, ver); c != nil {
		return c.models, c
	}
	conns := l.usableConnections(machineID)
	complete := true
	if !opts.NoFetch {
		pending, unsent := l.requestMissing(ctx, conns, false)
		// A listing missing a catalog whose fetch could not even be asked
		// for is answered but not kept: the next listing asks again.
		complete = !unsent
		if len(pending) > 0 {
			l.Await(ctx, pending)
			complete = complete && len(pending) == 0
			// What changed during the wait is listed: the state read
			// again, the connections after it (never older than it).
			ver = l.version()
			conns = l.usableConnections(machineID)
		}
	}
	// Callers that miss together (a second passed under load) share one
	// build of the same state instead of each building its own copy.
	out, _, _ := l.builds.Do(flightKey(key, ver), func() (any, error) {
		// A build that ended between this caller's look at the cache and
		// now left its listing there: that is the one to answer.
		if c := l.cached(key, ver); c != nil {
			return c, nil
		}
		if l.building != nil {
			l.building()
		}
		built := l.now()
		models, until := l.build(machineID, conns, opts)
		c := &cachedListing{version: ver, until: until, models: models, kept: complete}
		if !complete {
			return c, nil // answered, not kept
		}
		if ceiling := built.Add(cacheTTL); until.IsZero() || until.After(ceiling) {
			c.until = ceiling
		}
		l.mu.Lock()
		if l.cache == nil || len(l.cache) > 4096 {
			l.cache = make(map[cacheKey]*cachedListing)
		}
		l.cache[key] = c
		l.mu.Unlock()
		return c, nil
	})
	c := out.(*cachedListing)
	if !c.kept {
		return c.models, nil
	}
	return c.models, c
}

// cached returns the kept listing of key if it was built from the state ver
// and may still be answered.
func (l *Lister) cached(key cacheKey, ver [4]uint64) *cachedListing {
	l.mu.Lock()
	c := l.cache[key]
	l.mu.Unlock()
	if c == nil || c.version != ver || !l.now().Before(c.until) {
		return nil
	}
	return c
}

// flightKey names the build of key's listing from the state ver: a listing
// built from the same state is the same listing.
func flightKey(key cacheKey, ver [4]uint64) string {
	b := make([]byte, 0, len(key.machine)+len(key.kind)+96)
	b = append(append(append(b, key.machine...), 0), key.kind...)
	b = strconv.AppendBool(append(b, 0), key.noFetch)
	for _, v := range ver {
		b = strconv.AppendUint(append(b, 0), v, 10)
	}
	return string(b)
}

// build lists combos, connections' models and aliases; until is the
// earliest expiry of the live catalogs listed (zero: none).
func (l *Lister) build(machineID string, conns []*busv1.Connection, opts Options) (_ []Model, until time.Time) {
	models, until := l.connectionModels(machineID, conns)
	byID := make(map[string]Model, len(models))
	for _, m := range models {
		if _, ok := byID[m.ID]; !ok {
			byID[m.ID] = m
		}
	}
	settings := l.store.MachineSettings(machineID)
	var out []Model
	seen := make(map[string]bool, len(models))
	add := func(m Model) {
		if seen[m.ID] || (opts.Kind != "" && m.Kind != opts.Kind) {
			return
		}
		seen[m.ID] = true
		out = append(out, m)
	}
	for _, c := range settings.GetCombos() {
		// The router's own check: a combo none of whose models it can
		// serve would only be answered with an error. The listing is
		// built again whenever the connections, catalogs or settings the
		// router reads change, so it stays what the router serves.
		if _, err := l.resolver.ResolveAll(machineID, c.GetName()); err != nil {
			continue
		}
		kind := provider.KindLLM
		for _, id := range c.GetModels() {
			m, ok := byID[id]
			if !ok {
				m, ok = byID[settings.GetAliases()[id]]
			}
			if ok {
				kind = m.Kind
				break
			}
		}
		add(Model{ID: c.GetName(), OwnedBy: OwnerCombo, Kind: kind, Name: c.GetName()})
	}
	for _, m := range models {
		add(m)
	}
	// An alias is listed when the router serves it: its chain of aliases
	// ends in a listed model or combo.
	listed := make(map[string]Model, len(out))
	for _, m := range out {
		listed[m.ID] = m
	}
	aliases := settings.GetAliases()
	for _, name := range sortedKeys(aliases) {
		target := aliases[name]
		for range routing.MaxAliasDepth {
			m, ok := listed[target]
			if !ok {
				m, ok = byID[target]
			}
			if ok {
				m.ID, m.OwnedBy, m.Name = name, OwnerAlias, name
				add(m)
				break
			}
			if target, ok = aliases[target]; !ok {
				break
			}
		}
	}
	return out, until
}

// connectionModels lists every given connection's models, less the
// machine's disabled ones; until is the earliest expiry of the live
// catalogs it read (zero: none).
func (l *Lister) connectionModels(machineID string, conns []*busv1.Connection) (_ []Model, until time.Time) {
	var disabled map[string]*busv1.ModelIDs
	if e, ok := l.store.Disabled.Get(machineID); ok {
		disabled = e.Value.GetAliases()
	}
	var out []Model
	for _, c := range conns {
		spec, ok := l.registry.Lookup(c.GetProvider())
		if !ok {
			continue
		}
		alias := c.GetData().GetPrefix()
		if alias == "" {
			alias = spec.Alias
		}
		off := disabled[alias].GetIds()
		static := make(map[string]provider.Model, len(spec.Models))
		for _, m := range spec.Models {
			static[m.ID] = m
		}
		add := func(id, kind, typ string, created int64) {
			if slices.Contains(off, id) {
				return
			}
			m := Model{ID: alias + "/" + id, OwnedBy: alias, Provider: spec.ID, Name: id, Created: created}
			if s, ok := static[id]; ok {
				m.Kind = provider.KindOf(s.Kind, "", id)
				if s.Name != "" {
					m.Name = s.Name
				}
				m.ContextWindow, m.Dimensions, m.Input, m.Output = s.ContextWindow, s.Dimensions, s.Input, s.Output
			} else {
				m.Kind = provider.KindOf(kind, typ, id)
			}
			out = append(out, m)
		}
		switch {
		case len(c.GetData().GetEnabledModels()) > 0:
			for _, id := range c.GetData().GetEnabledModels() {
				add(id, "", "", 0)
			}
		case l.live(spec):
			cat, ok := l.fresh(c)
			if exp := cat.GetExpiresAt().AsTime(); ok && (until.IsZero() || exp.Before(until)) {
				until = exp
			}
			// A failed fetch keeps the list of an earlier one listed
			// while that is in force (grpcapi's PutCatalog).
			if ok && (cat.GetError() == "" || len(cat.GetModels()) > 0) {
				for _, m := range cat.GetModels() {
					add(m.GetId(), m.GetKind(), m.GetType(), m.GetCreated())
				}
			} else if spec.Family == "" {
				// A registry provider whose live list is unavailable still
				// has its static one.
				for _, m := range spec.Models {
					add(m.ID, m.Kind, "", 0)
				}
			}
		default:
			for _, m := range spec.Models {
				add(m.ID, m.Kind, "", 0)
			}
		}
	}
	return out, until
}

// live reports whether a provider's models come from a live catalog: the
// compatible families always, registry providers when they publish one.
func (l *Lister) live(spec provider.Spec) bool {
	return spec.Family != "" || spec.LiveCatalog
}

// usableConnections returns the machine's connections the router may send
// requests to, by priority.
func (l *Lister) usableConnections(machineID string) []*busv1.Connection {
	all := l.store.MachineConnections(machineID)
	out := all[:0:0]
	for _, c := range all {
		if routing.Usable(c) {
			out = append(out, c)
		}
	}
	return out
}

// Fetchable reports whether a connection's models come from a live catalog
// that may be fetched (interface 4.2 rules 4, 6 and 7).
func (l *Lister) Fetchable(c *busv1.Connection) bool {
	spec, ok := l.ownList(c)
	return ok && l.live(spec)
}

// ownList returns the spec of a connection whose models may be fetched from
// its upstream at all: a known provider, no enabled models of its own, not
// a cross-instance connection.
func (l *Lister) ownList(c *busv1.Connection) (provider.Spec, bool) {
	spec, ok := l.registry.Lookup(c.GetProvider())
	return spec, ok && len(c.GetData().GetEnabledModels()) == 0 && !provider.CrossInstance(c.GetProvider())
}

// keptFresh reports whether a connection's stored catalog is fetched again
// before it expires: a live catalog, and the list the console fetched for
// a connection of a provider with a listing (OpenAI's, Anthropic's) while
// it lists models, since routing tries a model's connections by their
// lists (routing.Tier), and a list that ran out would send a model again
// to a key that cannot serve it.
func (l *Lister) keptFresh(c *busv1.Connection, cat *busv1.Catalog) bool {
	spec, ok := l.ownList(c)
	return ok && (l.live(spec) || spec.Listing && len(cat.GetModels()) > 0)
}

// fresh returns the connection's stored catalog if it has not expired.
func (l *Lister) fresh(c *busv1.Connection) (*busv1.Catalog, bool) {
	e, ok := l.store.Catalogs.Get(store.ConnectionKey(c.GetMachineId(), c.GetId()))
	if !ok || !l.now().Before(e.Value.GetExpiresAt().AsTime()) {
		return nil, false
	}
	return e.Value, true
}

// Pending is a set of catalog fetches being waited for: catalog key to the
// revision the wait started from.
type Pending map[string]uint64

// requestMissing enqueues a refresh for every fetchable connection without a
// fresh catalog (every given connection when force is set) and returns what
// to wait for, and whether a refresh could not be enqueued.
func (l *Lister) requestMissing(ctx context.Context, conns []*busv1.Connection, force bool) (pending Pending, unsent bool) {
	for _, c := range conns {
		if !force && !l.Fetchable(c) {
			continue
		}
		if _, ok := l.fresh(c); ok && !force {
			continue
		}
		key := store.ConnectionKey(c.GetMachineId(), c.GetId())
		// One job per stale catalog revision: concurrent listings share it.
		var rev uint64
		if e, ok := l.store.Catalogs.Get(key); ok {
			rev = e.Revision
		}
		dedup := strconv.FormatUint(rev, 10)
		if force {
			dedup = "forced." + strconv.FormatInt(l.now().UnixNano(), 10)
		}
		if err := l.refresher.CatalogRefresh(ctx, c.GetMachineId(), c.GetId(), dedup); err != nil {
			l.log.Warn("catalog refresh not enqueued", "connection", c.GetId(), "err", err)
			unsent = true
			continue
		}
		if pending == nil {
			pending = make(Pending)
		}
		pending[key] = rev
	}
	return pending, unsent
}

// Refresh forces a fetch of one connection's catalog and waits for it, at
// most FetchWait. It reports whether a new catalog arrived.
func (l *Lister) Refresh(ctx context.Context, c *busv1.Connection) (*busv1.Catalog, bool) {
	pending, _ := l.requestMissing(ctx, []*busv1.Connection{c}, true)
	l.Await(ctx, pending)
	if len(pending) > 0 {
		return nil, false
	}
	e, ok := l.store.Catalogs.Get(store.ConnectionKey(c.GetMachineId(), c.GetId()))
	return e.Value, ok
}

// Await waits until every pending catalog has a newer, unexpired revision,
// at most FetchWait; the ones that arrived are removed from pending.
func (l *Lister) Await(ctx context.Context, pending Pending) {
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	for {
		changed := l.store.Catalogs.Changed()
		for key, rev := range pending {
			if e, ok := l.store.Catalogs.Get(key); ok && e.Revision > rev && l.now().Before(e.Value.GetExpiresAt().AsTime()) {
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

// RefreshExpiring enqueues fetches for the catalogs that expire within
// lead and are kept fresh (keptFresh), so listings rarely wait and routing
// keeps knowing each connection's models. Jobs are de-duplicated per
// catalog revision, so every core replica may run it.
func (l *Lister) RefreshExpiring(ctx context.Context, lead time.Duration) int {
	var due []*busv1.Connection
	horizon := l.now().Add(lead)
	l.store.Connections.Range(func(_ string, e kvmirror.Entry[*busv1.Connection]) bool {
		c := e.Value
		if !routing.Usable(c) {
			return true
		}
		if cat, ok := l.store.Catalogs.Get(store.ConnectionKey(c.GetMachineId(), c.GetId())); ok &&
			cat.Value.GetExpiresAt().AsTime().Before(horizon) && l.keptFresh(c, cat.Value) {
			due = append(due, c)
		}
		return true
	})
	n := 0
	for _, c := range due {
		key := store.ConnectionKey(c.GetMachineId(), c.GetId())
		e, _ := l.store.Catalogs.Get(key)
		if err := l.refresher.CatalogRefresh(ctx, c.GetMachineId(), c.GetId(), strconv.FormatUint(e.Revision, 10)); err == nil {
			n++
		}
	}
	return n
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
