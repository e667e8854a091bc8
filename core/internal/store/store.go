package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/spine"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Store holds core's buckets, each mirrored in memory.
type Store struct {
	Machines    *kvmirror.Bucket[*busv1.Machine]
	Connections *kvmirror.Bucket[*busv1.Connection]
	Keys        *kvmirror.Bucket[*busv1.APIKey]
	Settings    *kvmirror.Bucket[*busv1.Settings]
	Catalogs    *kvmirror.Bucket[*busv1.Catalog]
	Cooldowns   *kvmirror.Bucket[*busv1.Cooldown]
	Disabled    *kvmirror.Bucket[*busv1.DisabledModels]
	Rollups     *kvmirror.Bucket[*busv1.UsageRollup]
	OAuthFlows  *kvmirror.Bucket[*busv1.OAuthFlow]

	// conns indexes Connections by machine, rebuilt when the bucket changed
	// (MachineConnections).
	conns atomic.Pointer[connIndex]
	// catalogs indexes Catalogs by connection, made again when the bucket
	// changed (CatalogModels), one build at a time.
	catalogs   atomic.Pointer[catalogIndex]
	catalogsMu sync.Mutex
}

// connIndex is every machine's ordered connections at one generation of
// the Connections mirror.
type connIndex struct {
	gen       uint64
	byMachine map[string][]*busv1.Connection
}

// Open mirrors core's buckets, which must exist (spine.Topology.Ensure).
func Open(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*Store, error) {
	var s Store
	var err error
	if s.Machines, err = open(ctx, js, spine.BucketMachines, func() *busv1.Machine { return new(busv1.Machine) }, log); err != nil {
		return nil, err
	}
	if s.Connections, err = open(ctx, js, spine.BucketConnections, func() *busv1.Connection { return new(busv1.Connection) }, log); err != nil {
		return nil, err
	}
	if s.Keys, err = open(ctx, js, spine.BucketKeys, func() *busv1.APIKey { return new(busv1.APIKey) }, log); err != nil {
		return nil, err
	}
	if s.Settings, err = open(ctx, js, spine.BucketSettings, func() *busv1.Settings { return new(busv1.Settings) }, log); err != nil {
		return nil, err
	}
	if s.Catalogs, err = open(ctx, js, spine.BucketCatalogs, func() *busv1.Catalog { return new(busv1.Catalog) }, log); err != nil {
		return nil, err
	}
	if s.Disabled, err = open(ctx, js, spine.BucketDisabledModels, func() *busv1.DisabledModels { return new(busv1.DisabledModels) }, log); err != nil {
		return nil, err
	}
	if s.Cooldowns, err = open(ctx, js, spine.BucketCooldowns, func() *busv1.Cooldown { return new(busv1.Cooldown) }, log); err != nil {
		return nil, err
	}
	if s.Rollups, err = open(ctx, js, spine.BucketUsageRollups, func() *busv1.UsageRollup { return new(busv1.UsageRollup) }, log); err != nil {
		return nil, err
	}
	if s.OAuthFlows, err = open(ctx, js, spine.BucketOAuthFlows, func() *busv1.OAuthFlow { return new(busv1.OAuthFlow) }, log); err != nil {
		return nil, err
	}
	return &s, nil
}

func open[T proto.Message](ctx context.Context, js jetstream.JetStream, name string, newT func() T, log *slog.Logger) (*kvmirror.Bucket[T], error) {
	kv, err := js.KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", name, err)
	}
	return kvmirror.OpenBucket(ctx, kv, newT, log)
}

// ConnectionKey is the key of a connection in its bucket (also used for
// catalogs).
func ConnectionKey(machineID, connectionID string) string {
	return machineID + "." + connectionID
}

// MachineConnections returns a machine's connections ordered by priority,
// then creation, then id. The slice is shared with other callers: it must
// not be changed (appending to it is safe, its capacity is its length). It
// comes from an index of all machines' connections made again at the first
// call after any change of the Connections mirror, so a request reads no
// lock and sorts nothing while the connections stay as they are.
func (s *Store) MachineConnections(machineID string) []*busv1.Connection {
	gen := s.Connections.Generation()
	idx := s.conns.Load()
	if idx == nil || idx.gen != gen {
		idx = s.indexConnections(gen)
	}
	return idx.byMachine[machineID]
}

// indexConnections builds and keeps the index of generation gen. The
// entries read are at least as new as gen; when they are newer the index
// is only made again once more.
func (s *Store) indexConnections(gen uint64) *connIndex {
	idx := &connIndex{gen: gen, byMachine: map[string][]*busv1.Connection{}}
	s.Connections.Range(func(key string, e kvmirror.Entry[*busv1.Connection]) bool {
		// A connection belongs to every machine id that, with a dot,
		// prefixes its key (machine ids have no dot, so that is one).
		for i := range len(key) {
			if key[i] == '.' {
				idx.byMachine[key[:i]] = append(idx.byMachine[key[:i]], e.Value)
			}
		}
		return true
	})
	for machineID, conns := range idx.byMachine {
		slices.SortFunc(conns, func(a, b *busv1.Connection) int {
			return cmp.Or(
				cmp.Compare(a.GetPriority(), b.GetPriority()),
				a.GetCreatedAt().AsTime().Compare(b.GetCreatedAt().AsTime()),
				cmp.Compare(a.GetId(), b.GetId()),
			)
		})
		idx.byMachine[machineID] = slices.Clip(conns)
	}
	s.conns.Store(idx)
	return idx
}

// CatalogModels is a connection's stored catalog as routing reads it: its
// model ids and when it expires.
type CatalogModels struct {
	revision uint64
	ids      []string // sorted
	expires  time.Time
}

// Lists reports whether the catalog names the model, in force or not, by
// its id or by a dated snapshot of it (provider.SnapshotOf). nil names none.
func (c *CatalogModels) Lists(model string) bool {
	if c == nil {
		return false
	}
	i, ok := slices.BinarySearch(c.ids, model)
	if ok {
		return true
	}
	// The ids that extend the model sort right after where it would be.
	for _, id := range c.ids[i:] {
		if !strings.HasPrefix(id, model) {
			return false
		}
		if provider.SnapshotOf(id, model) {
			return true
		}
	}
	return false
}

// InForce reports whether the catalog is the connection's known model list
// at now: it lists models and has not expired. A refresh that failed keeps
// the list of an earlier one in force until that one's hour ends
// (grpcapi's PutCatalog); a failure with no list before it lists none, so
// the connection's list is unknown. nil is not in force.
func (c *CatalogModels) InForce(now time.Time) bool {
	return c != nil && len(c.ids) > 0 && now.Before(c.expires)
}

// catalogIndex is every connection's catalog at one generation of the
// Catalogs mirror.
type catalogIndex struct {
	gen    uint64
	byConn map[connectionRef]*CatalogModels
}

type connectionRef struct{ machine, connection string }

// CatalogModels returns the stored catalog of a connection, nil when it
// has none. It comes from an index of all catalogs made again at the first
// call after any change of the Catalogs mirror (a catalog that did not
// change keeps its entry), so a request builds no key and scans no list.
func (s *Store) CatalogModels(machineID, connectionID string) *CatalogModels {
	gen := s.Catalogs.Generation()
	idx := s.catalogs.Load()
	if idx == nil || idx.gen != gen {
		idx = s.indexCatalogs(gen)
	}
	return idx.byConn[connectionRef{machineID, connectionID}]
}

// indexCatalogs builds and keeps the index of generation gen, or returns
// one at least as new that another caller built meanwhile.
func (s *Store) indexCatalogs(gen uint64) *catalogIndex {
	s.catalogsMu.Lock()
	defer s.catalogsMu.Unlock()
	prev := s.catalogs.Load()
	if prev != nil && prev.gen >= gen {
		return prev
	}
	idx := &catalogIndex{gen: gen}
	if prev != nil {
		idx.byConn = make(map[connectionRef]*CatalogModels, len(prev.byConn))
	} else {
		idx.byConn = map[connectionRef]*CatalogModels{}
	}
	var changed []kvmirror.Entry[*busv1.Catalog]
	var refs []connectionRef
	s.Catalogs.Range(func(key string, e kvmirror.Entry[*busv1.Catalog]) bool {
		machine, connection, ok := strings.Cut(key, ".")
		if !ok {
			return true
		}
		ref := connectionRef{machine, connection}
		if prev != nil {
			if c := prev.byConn[ref]; c != nil && c.revision == e.Revision {
				idx.byConn[ref] = c
				return true
			}
		}
		changed, refs = append(changed, e), append(refs, ref)
		return true
	})
	// The changed catalogs' lists are sorted out of the bucket's lock.
	for i, e := range changed {
		c := &CatalogModels{revision: e.Revision, expires: e.Value.GetExpiresAt().AsTime(), ids: make([]string, len(e.Value.GetModels()))}
		for j, m := range e.Value.GetModels() {
			c.ids[j] = m.GetId()
		}
		slices.Sort(c.ids)
		idx.byConn[refs[i]] = c
	}
	s.catalogs.Store(idx)
	return idx
}

// CatchUpRouting brings the buckets routing reads (settings, connections,
// catalogs) up to what they held when it was called: a model that did not
// resolve is looked up again after it, since its connection may have been
// created through another core replica a moment ago.
func (s *Store) CatchUpRouting(ctx context.Context) error {
	return kvmirror.CatchUp(ctx, s.Settings, s.Connections, s.Catalogs)
}

// CatchUp brings every bucket up to what it held when it was called
// (kvmirror.Bucket.CatchUp).
func (s *Store) CatchUp(ctx context.Context) error {
	return kvmirror.CatchUp(ctx, s.Machines, s.Connections, s.Keys, s.Settings, s.Catalogs,
		s.Cooldowns, s.Disabled, s.Rollups, s.OAuthFlows)
}

// MachineSettings returns a machine's settings, or zero settings.
func (s *Store) MachineSettings(machineID string) *busv1.Settings {
	if e, ok := s.Settings.Get(machineID); ok {
		return e.Value
	}
	return &busv1.Settings{}
}

// DisabledIDs returns a machine's disabled model ids of one alias.
func (s *Store) DisabledIDs(machineID, alias string) []string {
	if e, ok := s.Disabled.Get(machineID); ok {
		return e.Value.GetAliases()[alias].GetIds()
	}
	return nil
}

// SealLegacy rewrites every connection that still carries in plain text
// what earlier releases stored so (its proxy URL), with seal, which moves it
// into the sealed secrets and reports whether the connection changed. It
// returns how many connections were rewritten; a connection seal cannot
// handle is logged and left as it is (it keeps working, read in place).
func (s *Store) SealLegacy(ctx context.Context, seal func(*busv1.Connection) (bool, error), log *slog.Logger) int {
	var keys []string
	s.Connections.Range(func(key string, e kvmirror.Entry[*busv1.Connection]) bool {
		if e.Value.GetData().GetProxyUrl() != "" {
			keys = append(keys, key)
		}
		return true
	})
	n := 0
	for _, key := range keys {
		changed := false
		_, err := s.Connections.Modify(ctx, key, func(c *busv1.Connection) error {
			var err error
			changed, err = seal(c)
			return err
		})
		if err != nil {
			if !errors.Is(err, kvmirror.ErrNotFound) {
				log.Warn("a connection's plain proxy URL was not sealed", "connection", key, "err", err)
			}
			continue
		}
		if changed {
			n++
		}
	}
	return n
}
