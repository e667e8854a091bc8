package catalog

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/store/storetest"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// listedIDs lists a machine's model ids and checks that the router serves
// every one of them: a client picking a model from the listing is never
// answered that no connection serves it.
func listedIDs(t *testing.T, ctx context.Context, st *store.Store, l *Lister, machine string, opts Options) []string {
	t.Helper()
	r := routing.NewResolver(st, provider.NewRegistry())
	var ids []string
	for _, m := range l.List(ctx, machine, opts) {
		_, err := r.ResolveAll(machine, m.ID)
		assert.NoError(t, err, "listed model %q (owned by %s) is not served", m.ID, m.OwnedBy)
		ids = append(ids, m.ID)
	}
	return ids
}

// A connection whose token refresh failed (it needs a new login) stays
// active but is refused by routing: its models, and the aliases to them,
// are not listed until it is signed in again.
func TestListingLeavesOutConnectionsThatNeedANewLogin(t *testing.T) {
	ctx, st := storetest.Open(t)
	const machine = "0123456789abcdef"
	stale := &busv1.Connection{
		Id: "c1", MachineId: machine, Provider: "openai", IsActive: true, CreatedAt: timestamppb.Now(),
		Data:  &busv1.ProviderData{EnabledModels: []string{"gpt-4o-mini"}},
		Oauth: &busv1.OAuthState{NeedsRelogin: true, TokenUrl: "https://auth.example/token"},
	}
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, "c1"), stale))
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, "c2"), &busv1.Connection{
		Id: "c2", MachineId: machine, Provider: "openai", IsActive: true, CreatedAt: timestamppb.Now(),
		Data: &busv1.ProviderData{Prefix: "work", EnabledModels: []string{"gpt-4o"}},
	}))
	require.NoError(t, st.Settings.Put(ctx, machine, &busv1.Settings{Aliases: map[string]string{"fast": "openai/gpt-4o-mini"}}))
	require.Eventually(t, func() bool {
		return len(st.MachineConnections(machine)) == 2 && len(st.MachineSettings(machine).GetAliases()) == 1
	}, 5*time.Second, time.Millisecond)

	l := NewLister(st, provider.NewRegistry(), nil, slog.New(slog.DiscardHandler))
	for range 2 { // built, then kept
		assert.Equal(t, []string{"work/gpt-4o"}, listedIDs(t, ctx, st, l, machine, Options{}))
	}

	// Signed in again: its models are listed at once, not a cache lifetime
	// later.
	signedIn := &busv1.Connection{
		Id: "c1", MachineId: machine, Provider: "openai", IsActive: true, CreatedAt: stale.GetCreatedAt(),
		Data:  &busv1.ProviderData{EnabledModels: []string{"gpt-4o-mini"}},
		Oauth: &busv1.OAuthState{TokenUrl: "https://auth.example/token"},
	}
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, "c1"), signedIn))
	require.Eventually(t, func() bool {
		for _, c := range st.MachineConnections(machine) {
			if c.GetId() == "c1" && !c.GetOauth().GetNeedsRelogin() {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
	assert.ElementsMatch(t, []string{"openai/gpt-4o-mini", "work/gpt-4o", "fast"}, listedIDs(t, ctx, st, l, machine, Options{}))
}

// A combo is listed only while one of its models can be served; its kind is
// that of the first model listed.
func TestListingLeavesOutCombosNoModelServes(t *testing.T) {
	ctx, st := storetest.Open(t)
	const machine = "0123456789abcdef"
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, "c1"), &busv1.Connection{
		Id: "c1", MachineId: machine, Provider: "openai", IsActive: true, CreatedAt: timestamppb.Now(),
		Data: &busv1.ProviderData{EnabledModels: []string{"gpt-4o-mini", "text-embedding-3-small"}},
	}))
	require.NoError(t, st.Settings.Put(ctx, machine, &busv1.Settings{
		Aliases: map[string]string{"embed": "openai/text-embedding-3-small"},
		Combos: []*busv1.Combo{
			// No connection of Anthropic, and gpt-4o is not enabled.
			{Name: "smart", Models: []string{"anthropic/claude-sonnet-4", "openai/gpt-4o"}},
			{Name: "fallback", Models: []string{"anthropic/claude-sonnet-4", "openai/gpt-4o-mini"}},
			{Name: "vectors", Models: []string{"openai/text-embedding-3-large", "embed"}},
		},
	}))
	require.Eventually(t, func() bool {
		return len(st.MachineConnections(machine)) == 1 && len(st.MachineSettings(machine).GetCombos()) == 3
	}, 5*time.Second, time.Millisecond)

	l := NewLister(st, provider.NewRegistry(), nil, slog.New(slog.DiscardHandler))
	for range 2 { // built, then kept
		ids := listedIDs(t, ctx, st, l, machine, Options{})
		assert.Equal(t, []string{"fallback", "vectors"}, ids[:2], "combos first")
		assert.NotContains(t, ids, "smart")
	}
	assert.Equal(t, []string{"vectors", "openai/text-embedding-3-small", "embed"},
		listedIDs(t, ctx, st, l, machine, Options{Kind: provider.KindEmbedding}))

	// An Anthropic connection serves the first combo: it is listed at once.
	require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, "c2"), &busv1.Connection{
		Id: "c2", MachineId: machine, Provider: "anthropic", IsActive: true, CreatedAt: timestamppb.Now(),
		Data: &busv1.ProviderData{EnabledModels: []string{"claude-sonnet-4"}},
	}))
	require.Eventually(t, func() bool { return len(st.MachineConnections(machine)) == 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"smart", "fallback", "vectors"}, listedIDs(t, ctx, st, l, machine, Options{})[:3])
}
