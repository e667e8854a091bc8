package store

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// openStores mirrors one set of buckets twice, as two core replicas do.
func openStores(t testing.TB) (*Store, *Store) {
	t.Helper()
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, spine.Topology{}.Ensure(ctx, js))
	a, err := Open(ctx, js, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	b, err := Open(ctx, js, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return a, b
}

func ids(conns []*busv1.Connection) []string {
	out := make([]string, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.GetId())
	}
	return out
}

func putConn(t testing.TB, s *Store, machineID, id string, priority int32, created time.Time) {
	t.Helper()
	require.NoError(t, s.Connections.Put(context.Background(), ConnectionKey(machineID, id), &busv1.Connection{
		Id: id, MachineId: machineID, Priority: priority, IsActive: true, CreatedAt: timestamppb.New(created),
	}))
}

// MachineConnections answers from an index; every change to the connections
// (one added, disabled, re-prioritised, deleted) is seen by the very next
// call, on the replica that wrote it at once and on another once its mirror
// has the change.
func TestMachineConnectionsSeesEveryChange(t *testing.T) {
	s, other := openStores(t)
	ctx := context.Background()
	const m1, m2 = "0123456789abcdef", "fedcba9876543210"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	assert.Nil(t, s.MachineConnections(m1), "no connections yet")
	putConn(t, s, m1, "a", 2, t0)
	putConn(t, s, m1, "b", 1, t0.Add(time.Hour))
	putConn(t, s, m1, "c", 1, t0)
	putConn(t, s, m2, "z", 0, t0)
	assert.Equal(t, []string{"c", "b", "a"}, ids(s.MachineConnections(m1)), "priority, then creation")
	assert.Equal(t, []string{"z"}, ids(s.MachineConnections(m2)))
	assert.Nil(t, s.MachineConnections("0000000000000000"))

	putConn(t, s, m1, "d", 0, t0)
	assert.Equal(t, []string{"d", "c", "b", "a"}, ids(s.MachineConnections(m1)), "an added connection")

	_, err := s.Connections.Modify(ctx, ConnectionKey(m1, "c"), func(c *busv1.Connection) error {
		c.IsActive = false
		return nil
	})
	require.NoError(t, err)
	got := s.MachineConnections(m1)
	require.Len(t, got, 4)
	assert.False(t, got[1].GetIsActive(), "a disabled connection")

	_, err = s.Connections.Modify(ctx, ConnectionKey(m1, "a"), func(c *busv1.Connection) error {
		c.Priority = -1
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "d", "c", "b"}, ids(s.MachineConnections(m1)), "a new priority")

	require.NoError(t, s.Connections.Delete(ctx, ConnectionKey(m1, "d")))
	assert.Equal(t, []string{"a", "c", "b"}, ids(s.MachineConnections(m1)), "a deleted connection")
	assert.Equal(t, []string{"z"}, ids(s.MachineConnections(m2)), "another machine is untouched")

	// The other replica learns of the writes through its watch.
	require.Eventually(t, func() bool {
		return assert.ObjectsAreEqual([]string{"a", "c", "b"}, ids(other.MachineConnections(m1)))
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, other.Connections.Delete(ctx, ConnectionKey(m2, "z")))
	assert.Nil(t, other.MachineConnections(m2))
	require.Eventually(t, func() bool { return s.MachineConnections(m2) == nil }, 5*time.Second, 5*time.Millisecond)
}

// The shared slice may be appended to without touching what others read.
func TestMachineConnectionsAppendDoesNotShare(t *testing.T) {
	s, _ := openStores(t)
	const m1 = "0123456789abcdef"
	putConn(t, s, m1, "a", 0, time.Unix(0, 0))
	putConn(t, s, m1, "b", 1, time.Unix(0, 0))
	first := s.MachineConnections(m1)
	_ = append(first, &busv1.Connection{Id: "x"})
	second := append(s.MachineConnections(m1), &busv1.Connection{Id: "y"})
	assert.Equal(t, []string{"a", "b", "y"}, ids(second))
	assert.Equal(t, []string{"a", "b"}, ids(s.MachineConnections(m1)))
}

// A request's read of its machine's connections, with 100 machines of 3
// connections each in the store.
func BenchmarkMachineConnections(b *testing.B) {
	s, _ := openStores(b)
	t0 := time.Unix(0, 0)
	for m := range 100 {
		for c := range 3 {
			putConn(b, s, fmt.Sprintf("%016x", m), fmt.Sprintf("c%d", c), int32(c), t0)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(s.MachineConnections("0000000000000007")) != 3 {
			b.Fatal("missing connections")
		}
	}
}
