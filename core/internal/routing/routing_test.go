package routing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/store/storetest"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

const machine = "0123456789abcdef"

// putConnections stores connections c1, c2, ... of the provider in that
// priority order, with the enabled models given for each (nil: none).
func putConnections(t testing.TB, ctx context.Context, st *store.Store, providerID string, enabled ...[]string) {
	t.Helper()
	for i, models := range enabled {
		id := "c" + string(rune('1'+i))
		require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, id), &busv1.Connection{
			Id: id, MachineId: machine, Provider: providerID, IsActive: true, Priority: int32(i + 1),
			CreatedAt: timestamppb.Now(), Data: &busv1.ProviderData{EnabledModels: models},
		}))
	}
	require.Eventually(t, func() bool { return len(st.MachineConnections(machine)) == len(enabled) }, 5*time.Second, time.Millisecond)
}

// putCatalog stores a connection's catalog as a worker's fetch leaves it.
func putCatalog(t testing.TB, ctx context.Context, st *store.Store, id string, cat *busv1.Catalog) {
	t.Helper()
	cat.MachineId, cat.ConnectionId = machine, id
	require.NoError(t, st.Catalogs.Put(ctx, store.ConnectionKey(machine, id), cat))
	require.Eventually(t, func() bool {
		e, ok := st.Catalogs.Get(store.ConnectionKey(machine, id))
		return ok && e.Value.GetFetchedAt().AsTime().Equal(cat.GetFetchedAt().AsTime()) && len(e.Value.GetModels()) == len(cat.GetModels())
	}, 5*time.Second, time.Millisecond)
}

func listing(expires time.Time, ids ...string) *busv1.Catalog {
	cat := &busv1.Catalog{FetchedAt: timestamppb.Now(), ExpiresAt: timestamppb.New(expires)}
	for _, id := range ids {
		cat.Models = append(cat.Models, &busv1.Model{Id: id})
	}
	return cat
}

func connectionIDs(t Target) []string {
	var ids []string
	for _, c := range t.Connections {
		ids = append(ids, c.GetId())
	}
	return ids
}

// A model is tried first on the connections whose known model list (their
// enabled models, or the live catalog in force) names it, then on those
// whose list is unknown, and last on those whose list leaves it out, each
// group in priority order: two keys of one provider, the first without
// access to a model, send a request for it to the second first.
func TestResolveTriesTheConnectionsListingTheModelFirst(t *testing.T) {
	hour := time.Now().Add(time.Hour)
	past := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name     string
		provider string
		enabled  [][]string
		catalogs map[string]*busv1.Catalog
		model    string
		want     []string
	}{
		{name: "the second lists it", provider: "openrouter", enabled: [][]string{nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": listing(hour, "acme/small"), "c2": listing(hour, "acme/small", "acme/large")},
			model:    "acme/large", want: []string{"c2", "c1"}},
		{name: "both list it", provider: "openrouter", enabled: [][]string{nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": listing(hour, "acme/small"), "c2": listing(hour, "acme/small", "acme/large")},
			model:    "acme/small", want: []string{"c1", "c2"}},
		{name: "a static model neither lists", provider: "openrouter", enabled: [][]string{nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": listing(hour, "acme/small"), "c2": listing(hour, "acme/large")},
			model:    "meta-llama/llama-3.3-70b-instruct", want: []string{"c1", "c2"}},
		{name: "no catalogs", provider: "openai", enabled: [][]string{nil, nil},
			model: "gpt-4o", want: []string{"c1", "c2"}},
		{name: "the first's catalog unknown, the second lists it", provider: "openai", enabled: [][]string{nil, nil, nil},
			catalogs: map[string]*busv1.Catalog{"c2": listing(hour, "gpt-4o"), "c3": listing(hour, "gpt-4o-mini")},
			model:    "gpt-4o", want: []string{"c2", "c1", "c3"}},
		{name: "an expired catalog is unknown", provider: "openai", enabled: [][]string{nil, nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": listing(past, "gpt-4o-mini"), "c2": listing(hour, "gpt-4o-mini")},
			model:    "gpt-4o", want: []string{"c1", "c3", "c2"}},
		{name: "a failed refresh keeps the list in force", provider: "openai", enabled: [][]string{nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": func() *busv1.Catalog {
				c := listing(hour, "gpt-4o-mini")
				c.Error, c.Status = "upstream answered 503", 503
				return c
			}(), "c2": listing(hour, "gpt-4o")},
			model: "gpt-4o", want: []string{"c2", "c1"}},
		{name: "a failed refresh without a list is unknown", provider: "openai", enabled: [][]string{nil, nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": func() *busv1.Catalog {
				c := listing(time.Now().Add(time.Minute))
				c.Error, c.Status = "upstream answered 503", 503
				return c
			}(), "c2": listing(hour, "gpt-4o-mini")},
			model: "gpt-4o", want: []string{"c1", "c3", "c2"}},
		{name: "enabled models name it", provider: "openai", enabled: [][]string{nil, {"gpt-4o"}},
			catalogs: map[string]*busv1.Catalog{"c1": listing(hour, "gpt-4o-mini")},
			model:    "gpt-4o", want: []string{"c2", "c1"}},
		// Anthropic lists its models by snapshot; clients ask by alias.
		{name: "a snapshot of the alias", provider: "anthropic", enabled: [][]string{nil, nil},
			catalogs: map[string]*busv1.Catalog{"c2": listing(hour, "claude-sonnet-4-5-20250929")},
			model:    "claude-sonnet-4-5", want: []string{"c2", "c1"}},
		{name: "the alias of a snapshot the provider lists", provider: "anthropic", enabled: [][]string{nil, nil},
			model: "claude-sonnet-4-5", want: []string{"c1", "c2"}},
		{name: "not a snapshot", provider: "anthropic", enabled: [][]string{nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": listing(hour, "claude-opus-4-7-fast", "claude-opus-4-70-20260301"), "c2": listing(hour, "claude-opus-4-7-20260301")},
			model:    "claude-opus-4-7", want: []string{"c2", "c1"}},
		{name: "with the provider's prefix", provider: "openai", enabled: [][]string{nil, nil},
			catalogs: map[string]*busv1.Catalog{"c1": listing(hour, "gpt-4o-mini"), "c2": listing(hour, "gpt-4o")},
			model:    "openai/gpt-4o", want: []string{"c2", "c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, st := storetest.Open(t)
			putConnections(t, ctx, st, tc.provider, tc.enabled...)
			for id, cat := range tc.catalogs {
				putCatalog(t, ctx, st, id, cat)
			}
			r := NewResolver(st, provider.NewRegistry())
			targets, err := r.ResolveAll(machine, tc.model)
			require.NoError(t, err)
			require.Len(t, targets, 1)
			assert.Equal(t, tc.want, connectionIDs(targets[0]))
		})
	}
}

// The order follows a connection's catalog as it changes: a key whose new
// list leaves a model out goes after the others, and back once it lists
// the model again.
func TestResolveFollowsCatalogChanges(t *testing.T) {
	ctx, st := storetest.Open(t)
	putConnections(t, ctx, st, "openrouter", nil, nil)
	hour := time.Now().Add(time.Hour)
	putCatalog(t, ctx, st, "c1", listing(hour, "acme/small", "acme/large"))
	putCatalog(t, ctx, st, "c2", listing(hour, "acme/small", "acme/large"))
	r := NewResolver(st, provider.NewRegistry())
	order := func() []string {
		t.Helper()
		targets, err := r.ResolveAll(machine, "acme/large")
		require.NoError(t, err)
		return connectionIDs(targets[0])
	}
	assert.Equal(t, []string{"c1", "c2"}, order())
	putCatalog(t, ctx, st, "c1", listing(hour, "acme/small"))
	assert.Equal(t, []string{"c2", "c1"}, order())
	putCatalog(t, ctx, st, "c1", listing(hour, "acme/large"))
	assert.Equal(t, []string{"c1", "c2"}, order())
}

// BenchmarkResolve measures the resolution every request makes: a bare
// model, a prefixed one and one whose vendor part names a provider without
// a connection, against two keys of one provider whose live catalogs hold
// 500 models each.
func BenchmarkResolve(b *testing.B) {
	ctx, st := storetest.Open(b)
	putConnections(b, ctx, st, "openrouter", nil, nil)
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = fmt.Sprintf("acme/model-%03d", i)
	}
	putCatalog(b, ctx, st, "c1", listing(time.Now().Add(time.Hour), ids[:499]...))
	putCatalog(b, ctx, st, "c2", listing(time.Now().Add(time.Hour), ids...))
	r := NewResolver(st, provider.NewRegistry())
	for _, model := range []string{"acme/model-499", "openrouter/acme/model-250", "openai/gpt-4o-mini"} {
		b.Run(model, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.ResolveAll(machine, model); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An id whose vendor part names a provider the machine has no usable
// connection for ("openai/gpt-4o-mini" as OpenRouter writes it, with only
// an OpenRouter key) goes, whole, to a connection whose list names the
// whole id, as a bare id does; a connection serving the prefix still wins,
// and an id nothing lists keeps the prefix's error.
func TestResolveVendorIDWithoutTheVendorsConnection(t *testing.T) {
	hour := time.Now().Add(time.Hour)
	type conn struct {
		id, provider string
		data         *busv1.ProviderData
		off          bool
		catalog      *busv1.Catalog
	}
	openRouter := func(id string, cat *busv1.Catalog) conn {
		return conn{id: id, provider: "openrouter", data: &busv1.ProviderData{}, catalog: cat}
	}
	for _, tc := range []struct {
		name      string
		conns     []conn
		model     string
		err       error
		provider  string
		upstream  string
		want      []string
		wantTiers []Tier
	}{
		{name: "only OpenRouter, its catalog lists it",
			conns: []conn{openRouter("or", listing(hour, "openai/gpt-4o-mini"))},
			model: "openai/gpt-4o-mini", provider: "openrouter", upstream: "openai/gpt-4o-mini",
			want: []string{"or"}, wantTiers: []Tier{Listed}},
		{name: "only OpenRouter, its static list names it",
			conns: []conn{openRouter("or", nil)},
			model: "anthropic/claude-sonnet-4.6", provider: "openrouter", upstream: "anthropic/claude-sonnet-4.6",
			want: []string{"or"}, wantTiers: []Tier{Unknown}},
		{name: "two OpenRouter keys, the second lists it",
			conns: []conn{openRouter("or1", listing(hour, "acme/small")), openRouter("or2", listing(hour, "deepseek/deepseek-v3.2"))},
			model: "deepseek/deepseek-v3.2", provider: "openrouter", upstream: "deepseek/deepseek-v3.2",
			want: []string{"or2", "or1"}, wantTiers: []Tier{Listed, Unlisted}},
		{name: "a vLLM connection lists it",
			conns: []conn{{id: "vllm", provider: "openai-compatible-vllm", data: &busv1.ProviderData{}, catalog: listing(hour, "openai/gpt-oss-20b")}},
			model: "openai/gpt-oss-20b", provider: "openai-compatible-vllm", upstream: "openai/gpt-oss-20b",
			want: []string{"vllm"}, wantTiers: []Tier{Listed}},
		{name: "the OpenAI connection is switched off",
			conns: []conn{{id: "oa", provider: "openai", data: &busv1.ProviderData{}, off: true}, openRouter("or", listing(hour, "openai/gpt-4o-mini"))},
			model: "openai/gpt-4o-mini", provider: "openrouter", upstream: "openai/gpt-4o-mini",
			want: []string{"or"}, wantTiers: []Tier{Listed}},
		{name: "the OpenAI connection's enabled models leave it out",
			conns: []conn{{id: "oa", provider: "openai", data: &busv1.ProviderData{EnabledModels: []string{"gpt-4o"}}}, openRouter("or", listing(hour, "openai/gpt-4o-mini"))},
			model: "openai/gpt-4o-mini", provider: "openrouter", upstream: "openai/gpt-4o-mini",
			want: []string{"or"}, wantTiers: []Tier{Listed}},
		{name: "with an OpenAI connection, OpenAI",
			conns: []conn{openRouter("or", listing(hour, "openai/gpt-4o-mini")), {id: "oa", provider: "openai", data: &busv1.ProviderData{}}},
			model: "openai/gpt-4o-mini", provider: "openai", upstream: "gpt-4o-mini",
			want: []string{"oa"}, wantTiers: []Tier{Unknown}},
		{name: "with an OpenAI connection whose catalog leaves it out, OpenAI",
			conns: []conn{openRouter("or", listing(hour, "openai/gpt-4o-mini")), {id: "oa", provider: "openai", data: &busv1.ProviderData{}, catalog: listing(hour, "gpt-4o")}},
			model: "openai/gpt-4o-mini", provider: "openai", upstream: "gpt-4o-mini",
			want: []string{"oa"}, wantTiers: []Tier{Unlisted}},
		{name: "a connection whose prefix is the vendor's",
			conns: []conn{openRouter("or", listing(hour, "qwen/qwen3-coder")), {id: "q", provider: "openai-compatible-local", data: &busv1.ProviderData{Prefix: "qwen"}}},
			model: "qwen/qwen3-coder", provider: "openai-compatible-local", upstream: "qwen3-coder",
			want: []string{"q"}, wantTiers: []Tier{Unknown}},
		{name: "nothing lists it",
			conns: []conn{openRouter("or", listing(hour, "openai/gpt-4o-mini"))},
			model: "openai/gpt-9", err: ErrNoCredentials},
		{name: "nothing lists it, the OpenAI connection switched off",
			conns: []conn{{id: "oa", provider: "openai", data: &busv1.ProviderData{}, off: true}, openRouter("or", listing(hour, "acme/small"))},
			model: "openai/gpt-9", err: ErrNoCredentials},
		{name: "only a switched-off connection lists it",
			conns: []conn{{id: "or", provider: "openrouter", data: &busv1.ProviderData{}, off: true, catalog: listing(hour, "openai/gpt-4o-mini")}},
			model: "openai/gpt-4o-mini", err: ErrNoCredentials},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, st := storetest.Open(t)
			for i, c := range tc.conns {
				require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, c.id), &busv1.Connection{
					Id: c.id, MachineId: machine, Provider: c.provider, IsActive: !c.off, Priority: int32(i + 1),
					CreatedAt: timestamppb.Now(), Data: c.data,
				}))
			}
			require.Eventually(t, func() bool { return len(st.MachineConnections(machine)) == len(tc.conns) }, 5*time.Second, time.Millisecond)
			for _, c := range tc.conns {
				if c.catalog != nil {
					putCatalog(t, ctx, st, c.id, c.catalog)
				}
			}
			r := NewResolver(st, provider.NewRegistry())
			targets, err := r.ResolveAll(machine, tc.model)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, targets, 1)
			got := targets[0]
			assert.Equal(t, tc.provider, got.Spec.ID)
			assert.Equal(t, tc.upstream, got.Model)
			assert.Equal(t, tc.want, connectionIDs(got))
			var tiers []Tier
			for i := range got.Connections {
				tiers = append(tiers, got.Tier(i))
			}
			assert.Equal(t, tc.wantTiers, tiers)
		})
	}
}

// Enabled models are a hard filter: a model that no usable connection of
// the provider its prefix names enables is not found there, an error that
// names the provider (NotEnabledError), not a want of credentials, which
// stays the error of a provider without a usable connection.
func TestResolveModelNoConnectionEnables(t *testing.T) {
	type conn struct {
		id      string
		enabled []string
		off     bool
	}
	for _, tc := range []struct {
		name    string
		conns   []conn
		model   string
		err     error // nil: resolved
		enabled bool  // err is a NotEnabledError
		want    []string
	}{
		{name: "one key, the model left out",
			conns: []conn{{id: "work", enabled: []string{"gpt-4o-mini", "text-embedding-3-small"}}},
			model: "openai/gpt-4o", err: ErrModelNotFound, enabled: true},
		{name: "two keys, both leave it out",
			conns: []conn{{id: "a", enabled: []string{"gpt-4o-mini"}}, {id: "b", enabled: []string{"text-embedding-3-small"}}},
			model: "openai/gpt-4o", err: ErrModelNotFound, enabled: true},
		{name: "only a switched-off key enables it",
			conns: []conn{{id: "a", enabled: []string{"gpt-4o-mini"}}, {id: "b", enabled: []string{"gpt-4o"}, off: true}},
			model: "openai/gpt-4o", err: ErrModelNotFound, enabled: true},
		{name: "every key switched off",
			conns: []conn{{id: "a", enabled: []string{"gpt-4o"}, off: true}},
			model: "openai/gpt-4o", err: ErrNoCredentials},
		{name: "no key",
			model: "openai/gpt-4o", err: ErrNoCredentials},
		{name: "the second key enables it",
			conns: []conn{{id: "a", enabled: []string{"gpt-4o-mini"}}, {id: "b", enabled: []string{"gpt-4o"}}, {id: "c"}},
			model: "openai/gpt-4o", want: []string{"b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, st := storetest.Open(t)
			for i, c := range tc.conns {
				require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, c.id), &busv1.Connection{
					Id: c.id, MachineId: machine, Provider: "openai", IsActive: !c.off, Priority: int32(i + 1),
					CreatedAt: timestamppb.Now(), Data: &busv1.ProviderData{EnabledModels: c.enabled},
				}))
			}
			require.Eventually(t, func() bool { return len(st.MachineConnections(machine)) == len(tc.conns) }, 5*time.Second, time.Millisecond)
			r := NewResolver(st, provider.NewRegistry())
			targets, err := r.ResolveAll(machine, tc.model)
			if tc.err == nil {
				require.NoError(t, err)
				require.Len(t, targets, 1)
				assert.Equal(t, tc.want, connectionIDs(targets[0]))
				return
			}
			require.ErrorIs(t, err, tc.err)
			var notEnabled *NotEnabledError
			if !tc.enabled {
				assert.False(t, errors.As(err, &notEnabled), "%v", err)
				return
			}
			require.ErrorAs(t, err, &notEnabled)
			assert.Equal(t, "openai", notEnabled.Provider)
			assert.Equal(t, tc.model, notEnabled.Model)
			assert.NotErrorIs(t, err, ErrNoCredentials)
		})
	}
}

// Aliases stored before cycles were refused still load, and a model that
// leads into one ends as not found, alone or in a combo, where its other
// models are still served.
func TestResolveStoredAliasCycleEnds(t *testing.T) {
	ctx, st := storetest.Open(t)
	putConnections(t, ctx, st, "openai", []string{"gpt-4o-mini"})
	require.NoError(t, st.Settings.Put(ctx, machine, &busv1.Settings{
		Aliases: map[string]string{"a": "b", "b": "a", "self": "self", "fast": "openai/gpt-4o-mini"},
		Combos:  []*busv1.Combo{{Name: "both", Models: []string{"a", "fast"}}},
	}))
	require.Eventually(t, func() bool { return len(st.MachineSettings(machine).GetAliases()) == 4 }, 5*time.Second, time.Millisecond)
	r := NewResolver(st, provider.NewRegistry())
	for _, model := range []string{"a", "b", "self"} {
		_, err := r.ResolveAll(machine, model)
		assert.ErrorIs(t, err, ErrModelNotFound, model)
	}
	targets, err := r.ResolveAll(machine, "both")
	require.NoError(t, err)
	require.Len(t, targets, 1)
	assert.Equal(t, "gpt-4o-mini", targets[0].Model)
}

// An alias may name a combo, as a client would expect of a name the
// machine answers to, and a chain of aliases as long as the write allows
// resolves to its end.
func TestResolveAliasOfACombo(t *testing.T) {
	ctx, st := storetest.Open(t)
	putConnections(t, ctx, st, "openai", []string{"gpt-4o-mini", "gpt-4o"})
	chain := map[string]string{"x": "both", "y": "x"}
	for i := 1; i < MaxAliasDepth; i++ {
		chain["c"+strconv.Itoa(i)] = "c" + strconv.Itoa(i+1)
	}
	chain["c"+strconv.Itoa(MaxAliasDepth)] = "openai/gpt-4o"
	require.NoError(t, st.Settings.Put(ctx, machine, &busv1.Settings{
		Aliases: chain,
		Combos:  []*busv1.Combo{{Name: "both", Models: []string{"openai/gpt-4o-mini", "openai/gpt-4o"}}},
	}))
	require.Eventually(t, func() bool { return len(st.MachineSettings(machine).GetAliases()) == len(chain) }, 5*time.Second, time.Millisecond)
	r := NewResolver(st, provider.NewRegistry())
	for _, model := range []string{"x", "y"} {
		targets, err := r.ResolveAll(machine, model)
		require.NoError(t, err, model)
		require.Len(t, targets, 2, model)
		assert.Equal(t, "gpt-4o-mini", targets[0].Model)
		assert.Equal(t, "gpt-4o", targets[1].Model)
	}
	targets, err := r.ResolveAll(machine, "c1")
	require.NoError(t, err)
	assert.Equal(t, "gpt-4o", targets[0].Model)
}

// A provider whose connections all await a new login (their refresh token
// was refused) has no credentials, and the error says which login would
// mend it; one switched off among them changes nothing, and a usable one
// serves.
func TestResolveConnectionsAwaitingALogin(t *testing.T) {
	type conn struct {
		id      string
		relogin bool
		off     bool
	}
	for _, tc := range []struct {
		name  string
		conns []conn
		login bool // the error is a NeedsLoginError
		want  []string
	}{
		{name: "the one connection needs a new login", conns: []conn{{id: "a", relogin: true}}, login: true},
		{name: "both need one, one switched off", conns: []conn{{id: "a", relogin: true}, {id: "b", relogin: true, off: true}}, login: true},
		{name: "only switched off", conns: []conn{{id: "a", off: true}}},
		{name: "one needs a login, the other serves", conns: []conn{{id: "a", relogin: true}, {id: "b"}}, want: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, st := storetest.Open(t)
			for i, c := range tc.conns {
				require.NoError(t, st.Connections.Put(ctx, store.ConnectionKey(machine, c.id), &busv1.Connection{
					Id: c.id, MachineId: machine, Provider: "codex", IsActive: !c.off, Priority: int32(i + 1),
					CreatedAt: timestamppb.Now(), Data: &busv1.ProviderData{},
					Oauth: &busv1.OAuthState{TokenUrl: "https://auth.example/token", NeedsRelogin: c.relogin},
				}))
			}
			require.Eventually(t, func() bool { return len(st.MachineConnections(machine)) == len(tc.conns) }, 5*time.Second, time.Millisecond)
			r := NewResolver(st, provider.NewRegistry())
			got, err := r.Resolve(machine, "codex/gpt-5")
			if tc.want != nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, connectionIDs(got))
				return
			}
			require.ErrorIs(t, err, ErrNoCredentials)
			var login *NeedsLoginError
			if !tc.login {
				assert.False(t, errors.As(err, &login), "%v", err)
				return
			}
			require.ErrorAs(t, err, &login)
			assert.Equal(t, "codex", login.Provider)
		})
	}
}
