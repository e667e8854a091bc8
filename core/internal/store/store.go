package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
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
// then creation, then id.
func (s *Store) MachineConnections(machineID string) []*busv1.Connection {
	prefix := machineID + "."
	var out []*busv1.Connection
	s.Connections.Range(func(key string, e kvmirror.Entry[*busv1.Connection]) bool {
		if strings.HasPrefix(key, prefix) {
			out = append(out, e.Value)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *busv1.Connection) int {
		return cmp.Or(
			cmp.Compare(a.GetPriority(), b.GetPriority()),
			a.GetCreatedAt().AsTime().Compare(b.GetCreatedAt().AsTime()),
			cmp.Compare(a.GetId(), b.GetId()),
		)
	})
	return out
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
