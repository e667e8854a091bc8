package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/store/storetest"
	"github.com/switchboardhq/switchboard/internal/clocktest"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Callers that find the kept listing too old at the same moment (a machine
// listed under load) get one listing built for all of them, not one each: a
// large listing built by every waiting request at once is what took the
// gateway's memory up under a listing load.
func TestCallersMissingTogetherShareOneBuild(t *testing.T) {
	ctx, st := storetest.Open(t)
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

	clock := clocktest.New(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	l := NewLister(st, provider.NewRegistry(), nil, slog.New(slog.DiscardHandler))
	l.now = clock.Now
	var builds atomic.Int32
	l.building = func() {
		builds.Add(1)
		time.Sleep(20 * time.Millisecond) // a large listing: the others arrive meanwhile
	}
	prev := l.List(ctx, machine, Options{})
	require.Len(t, prev, len(enabled))

	for round := range 5 {
		builds.Store(0)
		clock.Advance(cacheTTL + time.Millisecond) // the kept listing is too old
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
		require.EqualValues(t, 1, builds.Load(), "round %d: listings built", round)
		for i := range callers {
			require.Len(t, got[i], len(prev))
			require.Same(t, &got[0][0], &got[i][0], "round %d: caller %d built a listing of its own", round, i)
		}
		require.NotSame(t, &prev[0], &got[0][0], "round %d: the listing was not built again", round)
		prev = got[0]
	}
}

// A kept listing is not answered past the expiry of a live catalog it
// lists, however recently it was built: the expired catalog's models leave
// the listing then, not a cache lifetime later.
func TestKeptListingEndsWhenACatalogExpires(t *testing.T) {
	ctx, st := storetest.Open(t)
	const machine = "0123456789abcdef"
	clock := clocktest.New(time.Now())
	for _, c := range []struct {
		id     string
		expiry time.Duration
	}{{"soon", 10 * time.Second}, {"later", time.Hour}} {
		putLive(t, ctx, st, machine, c.id)
		require.NoError(t, st.Catalogs.Put(ctx, store.ConnectionKey(machine, c.id), &busv1.Catalog{
			MachineId: machine, ConnectionId: c.id, Models: []*busv1.Model{{Id: "m", Kind: "llm"}},
			FetchedAt: timestamppb.New(clock.Now()), ExpiresAt: timestamppb.New(clock.Now().Add(c.expiry)),
		}))
	}
	require.Eventually(t, func() bool {
		_, ok := st.Catalogs.Get(store.ConnectionKey(machine, "later"))
		return len(st.MachineConnections(machine)) == 2 && ok
	}, 5*time.Second, time.Millisecond)

	l := NewLister(st, provider.NewRegistry(), nil, slog.New(slog.DiscardHandler))
	l.now = clock.Now
	ids := func() []string {
		var out []string
		for _, m := range l.List(ctx, machine, Options{NoFetch: true}) {
			out = append(out, m.ID)
		}
		return out
	}
	require.Equal(t, []string{"soon/m", "later/m"}, ids())
	clock.Advance(9 * time.Second)
	require.Equal(t, []string{"soon/m", "later/m"}, ids(), "still fresh")
	clock.Advance(2 * time.Second)
	require.Equal(t, []string{"later/m"}, ids(), "the expired catalog is no longer listed")
}

// putLive stores an active connection of an OpenAI-compatible endpoint
// (its models come from a live catalog) whose models are listed as "id/...".
func putLive(t *testing.T, ctx context.Context, st *store.Store, machine, id string) {
	t.Helper()
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, id), &busv1.Connection{
		Id: id, MachineId: machine, Provider: "openai-compatible-" + id, IsActive: true, CreatedAt: timestamppb.Now(),
		Data: &busv1.ProviderData{BaseUrl: "http://127.0.0.1:9", Prefix: id},
	}))
}

// refresher stands for the job queue: it counts the fetches asked for, and
// does what the test gives it when asked (a worker's fetch, another
// replica's write).
type refresher struct {
	calls atomic.Int32
	do    func(connectionID string) error
}

func (r *refresher) CatalogRefresh(_ context.Context, _, connectionID, _ string) error {
	r.calls.Add(1)
	return r.do(connectionID)
}

// A listing that waited for a catalog fetch lists what changed meanwhile:
// a connection added during the wait is in it, and stays in the kept one.
func TestListingAfterAFetchHasWhatChangedDuringIt(t *testing.T) {
	ctx, st := storetest.Open(t)
	const machine = "0123456789abcdef"
	putLive(t, ctx, st, machine, "a")
	r := &refresher{do: func(id string) error {
		go func() {
			// Another replica adds a connection, then the fetch ends.
			_ = st.Connections.Put(ctx, store.ConnectionKey(machine, "b"), &busv1.Connection{
				Id: "b", MachineId: machine, Provider: "openai", IsActive: true, CreatedAt: timestamppb.Now(),
				Data: &busv1.ProviderData{EnabledModels: []string{"gpt-4o"}},
			})
			_ = st.Catalogs.Put(ctx, store.ConnectionKey(machine, id), &busv1.Catalog{
				MachineId: machine, ConnectionId: id, Models: []*busv1.Model{{Id: "m", Kind: "llm"}},
				FetchedAt: timestamppb.Now(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)),
			})
		}()
		return nil
	}}
	l := NewLister(st, provider.NewRegistry(), r, slog.New(slog.DiscardHandler))
	for range 2 { // built, then kept
		var ids []string
		for _, m := range l.List(ctx, machine, Options{}) {
			ids = append(ids, m.ID)
		}
		require.ElementsMatch(t, []string{"a/m", "openai/gpt-4o"}, ids)
	}
	require.EqualValues(t, 1, r.calls.Load())
}

// A listing without a catalog whose fetch could not be asked for (the job
// queue unavailable) is not kept: the next listing asks again.
func TestListingIsNotKeptWhenAFetchCouldNotBeAsked(t *testing.T) {
	ctx, st := storetest.Open(t)
	const machine = "0123456789abcdef"
	putLive(t, ctx, st, machine, "a")
	r := &refresher{do: func(string) error { return errors.New("nats: no responders available for request") }}
	l := NewLister(st, provider.NewRegistry(), r, slog.New(slog.DiscardHandler))
	for i := range 3 {
		require.Empty(t, l.List(ctx, machine, Options{}))
		require.EqualValues(t, i+1, r.calls.Load(), "listing %d asked for the fetch again", i+1)
	}
}

// Render makes its value once for a kept listing and answers it again while
// the listing is kept; a listing that is not kept is rendered on each call.
func TestRenderOncePerKeptListing(t *testing.T) {
	ctx, st := storetest.Open(t)
	const machine = "0123456789abcdef"
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, "o"), &busv1.Connection{
		Id: "o", MachineId: machine, Provider: "openai", IsActive: true, CreatedAt: timestamppb.Now(),
		Data: &busv1.ProviderData{EnabledModels: []string{"gpt-4o"}},
	}))
	putLive(t, ctx, st, machine, "a") // its fetch cannot be asked for
	var renders atomic.Int32
	render := func(models []Model) any {
		renders.Add(1)
		return &models
	}
	r := &refresher{do: func(string) error { return errors.New("nats: no responders available for request") }}
	l := NewLister(st, provider.NewRegistry(), r, slog.New(slog.DiscardHandler))
	l.Render(ctx, machine, Options{}, render)
	l.Render(ctx, machine, Options{}, render)
	require.EqualValues(t, 2, renders.Load(), "a listing not kept is rendered each time")

	renders.Store(0)
	first := l.Render(ctx, machine, Options{NoFetch: true}, render)
	for range 3 {
		require.Same(t, first, l.Render(ctx, machine, Options{NoFetch: true}, render))
	}
	require.EqualValues(t, 1, renders.Load(), "a kept listing is rendered once")
	var ids []string
	for _, m := range *first.(*[]Model) {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"openai/gpt-4o"}, ids, "NoFetch lists without the missing catalog")
}
