package catalog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Callers that find the kept listing a second old at the same moment (a
// machine listed under load) get one listing built for all of them, not one
// each: a large listing built by every waiting request at once is what
// took the gateway's memory up under a listing load.
func TestCallersMissingTogetherShareOneBuild(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, spine.Topology{}.Ensure(ctx, js))
	st, err := store.Open(ctx, js, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	const machine = "0123456789abcdef"
	enabled := make([]string, 2000)
	for i := range enabled {
		enabled[i] = fmt.Sprintf("model-%04d", i)
	}
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, "c1"), &busv1.Connection{
		Id: "c1", MachineId: machine, Provider: "openai", IsActive: true, CreatedAt: timestamppb.Now(),
		Data: &busv1.ProviderData{EnabledModels: enabled},
	}))
	require.Eventually(t, func() bool { return len(st.MachineConnections(machine)) == 1 }, 5*time.Second, time.Millisecond)

	var mu sync.Mutex
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	l := NewLister(st, provider.NewRegistry(), nil, slog.New(slog.DiscardHandler))
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	prev := l.List(ctx, machine, Options{})
	require.Len(t, prev, len(enabled))

	for round := range 5 {
		mu.Lock()
		now = now.Add(cacheTTL + time.Millisecond) // the kept listing is too old
		mu.Unlock()
		const callers = 16
		got := make([][]Model, callers)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range callers {
			done.Go(func() {
				start.Wait()
				got[i] = l.List(ctx, machine, Options{})
			})
		}
		start.Done()
		done.Wait()
		for i := range callers {
			require.Len(t, got[i], len(prev))
			require.Same(t, &got[0][0], &got[i][0], "round %d: caller %d built a listing of its own", round, i)
		}
		require.NotSame(t, &prev[0], &got[0][0], "round %d: the listing was not built again", round)
		prev = got[0]
	}
}
