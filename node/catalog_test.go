package node_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

func listing(t *testing.T, in *nodetest.Instance, path string) map[string]map[string]any {
	t.Helper()
	r := in.Do(t, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	out := map[string]map[string]any{}
	for _, d := range r.JSON["data"].([]any) {
		m := d.(map[string]any)
		out[m["id"].(string)] = m
	}
	return out
}

// Interface 4.2, /v1/models rule 1: models reachable through aliases are
// listed, and combos come first.
func TestModelsListsAliasesAndCombos(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini", "text-embedding-3-small"}}})
	r := sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": map[string]string{
		"fast": "openai/gpt-4o-mini", "embed": "openai/text-embedding-3-small", "ghost": "openai/not-enabled",
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{
		{"name": "best", "models": []string{"openai/gpt-4o-mini", "fast"}},
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	ids := sb.ModelIDs(t)
	require.NotEmpty(t, ids)
	assert.Equal(t, "best", ids[0], "combos are listed first")
	models := listing(t, sb, "/v1/models")
	assert.Equal(t, "combo", models["best"]["owned_by"])
	assert.Equal(t, "alias", models["fast"]["owned_by"])
	assert.Equal(t, "llm", models["fast"]["kind"])
	assert.Equal(t, "embedding", models["embed"]["kind"])
	assert.NotContains(t, models, "ghost", "an alias to an unreachable model is not listed")

	// An alias of a combo, and of another alias, are served and listed.
	r = sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": map[string]string{
		"fast": "openai/gpt-4o-mini", "quick": "fast", "top": "best",
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	models = listing(t, sb, "/v1/models")
	assert.Equal(t, "alias", models["top"]["owned_by"])
	assert.Equal(t, "llm", models["top"]["kind"])
	assert.Equal(t, "alias", models["quick"]["owned_by"])
	for _, id := range []string{"top", "quick"} {
		got := sb.Do(t, http.MethodGet, "/v1/models/"+id, nil)
		assert.Equal(t, http.StatusOK, got.Status, "%s: %s", id, got.Body)
	}

	got := sb.Admin(t, http.MethodGet, "/api/models/aliases", nil)
	assert.Equal(t, "openai/gpt-4o-mini", got.JSON["aliases"].(map[string]any)["fast"])
	bad := sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{{"name": "empty", "models": []string{}}}})
	assert.Equal(t, http.StatusBadRequest, bad.Status)
	bad = sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": map[string]string{"loop": "loop"}})
	assert.Equal(t, http.StatusBadRequest, bad.Status)
	// A chain longer than the router follows would never be served.
	bad = sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": map[string]string{
		"a1": "a2", "a2": "a3", "a3": "a4", "a4": "a5", "a5": "openai/gpt-4o-mini"}})
	assert.Equal(t, http.StatusBadRequest, bad.Status, "%s", bad.Body)
	assert.Contains(t, string(bad.Body), "a1 -> a2 -> a3 -> a4 -> a5 -> openai/gpt-4o-mini")
}

// A combo tries its models in order: when the first model's connections
// are all rate limited, the next model answers.
func TestComboFallsThroughToTheNextModel(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	first := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	second := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "a", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": first.URL()}})
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-b", "name": "b",
		"providerSpecificData": map[string]any{"baseUrl": second.URL(), "prefix": "local", "enabledModels": []string{"nomic-embed"}}})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{
		{"name": "embedder", "models": []string{"openai/text-embedding-3-small", "local/nomic-embed"}},
	}}).Status)

	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "embedder", "input": "x"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, 1, first.Count(pathEmbed))

	first.SetDefault(pathEmbed, upstreamtest.RateLimited("60"))
	r = sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "embedder", "input": "x"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, 1, second.Count(pathEmbed), "the combo's second model answered")

	// A request error of the first model is the client's: no next model.
	first.SetDefault(pathEmbed, upstreamtest.OK())
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/providers/"+connectionID(t, sb, "a")+"/cooldowns", nil).Status)
	first.Enqueue(pathEmbed, upstreamtest.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "too long"))
	r = sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "embedder", "input": "x"})
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, 1, second.Count(pathEmbed))
}

func connectionID(t *testing.T, sb *nodetest.Instance, name string) string {
	t.Helper()
	for _, c := range sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any) {
		if c.(map[string]any)["name"] == name {
			return c.(map[string]any)["id"].(string)
		}
	}
	t.Fatalf("no connection %q", name)
	return ""
}

// Interface 4.2, /v1/models rule 2, and /api/models/disabled.
func TestDisabledModels(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o", "gpt-4o-mini", "o4-mini"}}})

	for _, body := range []map[string]any{{"ids": []string{"x"}}, {"providerAlias": "openai"}, {"providerAlias": "openai", "ids": []string{}}} {
		assert.Equal(t, http.StatusBadRequest, sb.Admin(t, http.MethodPost, "/api/models/disabled", body).Status, "%v", body)
	}
	r := sb.Admin(t, http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": "openai", "ids": []string{"gpt-4o", "o4-mini"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, true, r.JSON["success"])
	assert.Equal(t, []string{"openai/gpt-4o-mini"}, sb.ModelIDs(t))

	all := sb.Admin(t, http.MethodGet, "/api/models/disabled", nil)
	assert.ElementsMatch(t, []any{"gpt-4o", "o4-mini"}, all.JSON["disabled"].(map[string]any)["openai"])
	one := sb.Admin(t, http.MethodGet, "/api/models/disabled?providerAlias=openai", nil)
	assert.ElementsMatch(t, []any{"gpt-4o", "o4-mini"}, one.JSON["ids"])

	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/models/disabled?providerAlias=openai&id=gpt-4o", nil).Status)
	assert.ElementsMatch(t, []string{"openai/gpt-4o", "openai/gpt-4o-mini"}, sb.ModelIDs(t))
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/models/disabled?providerAlias=openai", nil).Status)
	assert.Len(t, sb.ModelIDs(t), 3)
	assert.Equal(t, http.StatusBadRequest, sb.Admin(t, http.MethodDelete, "/api/models/disabled", nil).Status)
}

// A listing is answered from the one built before only while nothing it
// lists changed: a change that keeps the count (other enabled models, a new
// prefix) shows at once, for each kind and through the model info route.
func TestListingFollowsChangesOfTheSameSize(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	id := sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o", "text-embedding-3-small"}}})
	for range 2 { // the second answer is the kept one
		assert.ElementsMatch(t, []string{"openai/gpt-4o", "openai/text-embedding-3-small"}, sb.ModelIDs(t))
		assert.Contains(t, listing(t, sb, "/v1/models?kind=llm"), "openai/gpt-4o")
	}
	r := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini", "text-embedding-3-large"}}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.ElementsMatch(t, []string{"openai/gpt-4o-mini", "openai/text-embedding-3-large"}, sb.ModelIDs(t))
	llms := listing(t, sb, "/v1/models?kind=llm")
	assert.Len(t, llms, 1)
	assert.Contains(t, llms, "openai/gpt-4o-mini")
	assert.Equal(t, http.StatusOK, sb.Do(t, http.MethodGet, "/v1/models/openai/gpt-4o-mini", nil).Status)

	r = sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"prefix": "work"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.ElementsMatch(t, []string{"work/gpt-4o-mini", "work/text-embedding-3-large"}, sb.ModelIDs(t))
}

// Disabling is effective at once on every core replica.
func TestDisabledModelsAcrossCoreReplicas(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	secret := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	var edges []*nodetest.Instance
	for range 2 {
		cfg := nodetest.Config(t.TempDir())
		cfg.NATSURL, cfg.SecretKey = natsURL, secret
		core := nodetest.Start(t, cfg, node.RoleCore)
		ecfg := nodetest.Config(t.TempDir())
		ecfg.CoreAddr = core.Node.GRPCAddr()
		edges = append(edges, nodetest.Start(t, ecfg, node.RoleEdge))
	}
	edges[0].CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o", "gpt-4o-mini"}}})
	require.Eventually(t, func() bool { return len(edges[1].ModelIDs(t)) == 2 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, http.StatusOK, edges[0].Admin(t, http.MethodPost, "/api/models/disabled",
		map[string]any{"providerAlias": "openai", "ids": []string{"gpt-4o"}}).Status)
	require.Eventually(t, func() bool {
		ids := edges[1].ModelIDs(t)
		return len(ids) == 1 && ids[0] == "openai/gpt-4o-mini"
	}, 5*time.Second, 10*time.Millisecond)
}

// Rule 8: a catalog record stored by an older version carries `type`, not
// `kind`, and still lists with the right kind; a record with neither gets a
// kind guessed from its id.
func TestKindFallsBackToTypeOnOlderRecords(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithModels("m"))
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-old", "name": "old",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "old"}})
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, spine.BucketCatalogs)
	require.NoError(t, err)
	older := &busv1.Catalog{
		MachineId: sb.Node.DefaultMachineID(), ConnectionId: id,
		Models: []*busv1.Model{
			{Id: "voice-one", Type: "tts"},
			{Id: "vec-large", Type: "embedding"},
			{Id: "both", Kind: "image", Type: "llm"},
			{Id: "whisper-small"},
		},
		FetchedAt: timestamppb.Now(), ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)),
	}
	data, err := proto.Marshal(older)
	require.NoError(t, err)
	_, err = kv.Put(ctx, sb.Node.DefaultMachineID()+"."+id, data)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return len(sb.ModelIDs(t)) == 4 }, 5*time.Second, 10*time.Millisecond)
	models := listing(t, sb, "/v1/models")
	assert.Equal(t, "tts", models["old/voice-one"]["kind"])
	assert.Equal(t, "embedding", models["old/vec-large"]["kind"])
	assert.Equal(t, "image", models["old/both"]["kind"], "kind wins over type")
	assert.Equal(t, "stt", models["old/whisper-small"]["kind"], "guessed from the id")
	assert.Zero(t, up.Count("/v1/models"), "the stored catalog is used")
}

func TestModelsByKindAndInfo(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini", "text-embedding-3-small", "whisper-1"}}})

	emb := listing(t, sb, "/v1/models/embedding")
	assert.Equal(t, []string{"openai/text-embedding-3-small"}, keys(emb))
	assert.Equal(t, []string{"openai/whisper-1"}, keys(listing(t, sb, "/v1/models/stt")))
	assert.Empty(t, listing(t, sb, "/v1/models/video"))
	r := sb.Do(t, http.MethodGet, "/v1/models/holograms", nil)
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, "not_found_error", errorType(r))

	info := sb.Do(t, http.MethodGet, "/v1/models/info?id=openai/text-embedding-3-small", nil)
	require.Equal(t, http.StatusOK, info.Status, "%s", info.Body)
	assert.Equal(t, "embedding", info.JSON["kind"])
	assert.Equal(t, "/v1/embeddings", info.JSON["endpoint"])
	assert.Equal(t, "openai", info.JSON["owned_by"])
	assert.EqualValues(t, 1536, info.JSON["dimensions"])

	info = sb.Do(t, http.MethodGet, "/v1/models/info?id=openai/gpt-4o-mini&kind=llm", nil)
	require.Equal(t, http.StatusOK, info.Status)
	assert.Equal(t, "/v1/chat/completions", info.JSON["endpoint"])
	assert.Positive(t, info.JSON["contextWindow"])

	r = sb.Do(t, http.MethodGet, "/v1/models/info?id=openai/gpt-4o-mini&kind=embedding", nil)
	assert.Equal(t, http.StatusNotFound, r.Status, "kind disambiguates")
	r = sb.Do(t, http.MethodGet, "/v1/models/info", nil)
	assert.Equal(t, http.StatusBadRequest, r.Status)
	r = sb.Do(t, http.MethodGet, "/v1/models/info?id=acme/x", nil)
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, "not_found_error", errorType(r))
	assert.Equal(t, "model_not_found", errorCode(r))
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// /api/providers/{id}/models fetches a connection's upstream list now; the
// refresh route forces a new fetch; failures carry the upstream's status.
func TestConnectionModels(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithModels("a", "b"), upstreamtest.WithAPIKey("sk-up"))
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-x", "name": "x", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})

	r := sb.Admin(t, http.MethodGet, "/api/providers/"+id+"/models", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, id, r.JSON["connectionId"])
	assert.Equal(t, "openai-compatible-x", r.JSON["provider"])
	assert.Len(t, r.JSON["models"], 2)
	before := up.Count("/v1/models")

	r = sb.Admin(t, http.MethodPost, "/api/providers/"+id+"/models/refresh", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, before+1, up.Count("/v1/models"), "a refresh fetches again")

	up.SetDefault("/v1/models", upstreamtest.Unauthorized())
	r = sb.Admin(t, http.MethodGet, "/api/providers/"+id+"/models", nil)
	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	assert.NotContains(t, string(r.Body), "sk-up")

	r = sb.Admin(t, http.MethodGet, "/api/providers/no-such-id/models", nil)
	assert.Equal(t, http.StatusNotFound, r.Status)
}

// Anthropic-compatible upstreams are listed with their own headers.
func TestAnthropicCompatibleListing(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithModels("claude-sonnet-4"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-a", "name": "a", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": up.URL() + "/messages", "prefix": "claude"}})
	assert.Equal(t, []string{"claude/claude-sonnet-4"}, sb.ModelIDs(t))
	req := up.Requests()[0]
	assert.Equal(t, "/v1/models", req.Path, "the /messages suffix of the base URL is dropped")
	assert.Equal(t, "sk-ant", req.Header.Get("x-api-key"))
	assert.NotEmpty(t, req.Header.Get("anthropic-version"))
	assert.Empty(t, req.Header.Get("Authorization"))
}

// Catalogs near the end of their hour are fetched again before a listing
// has to wait for them.
func TestCatalogsAreRefreshedBeforeTheyExpire(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.CatalogScanEvery = 50 * time.Millisecond
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	up := upstreamtest.New(t, upstreamtest.WithModels("m1"))
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-s", "name": "s",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	require.Len(t, sb.ModelIDs(t), 1)
	require.Equal(t, 1, up.Count("/v1/models"))

	// Age the stored catalog to five minutes before its expiry.
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, spine.BucketCatalogs)
	require.NoError(t, err)
	key := sb.Node.DefaultMachineID() + "." + id
	e, err := kv.Get(ctx, key)
	require.NoError(t, err)
	cat := &busv1.Catalog{}
	require.NoError(t, proto.Unmarshal(e.Value(), cat))
	cat.ExpiresAt = timestamppb.New(time.Now().Add(5 * time.Minute))
	data, err := proto.Marshal(cat)
	require.NoError(t, err)
	_, err = kv.Put(ctx, key, data)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return up.Count("/v1/models") == 2 }, 10*time.Second, 20*time.Millisecond,
		"the scheduler fetched the catalog again with no listing asking")
	// The worker stores what it fetched through core a moment later.
	assert.Eventually(t, func() bool {
		e, err := kv.Get(ctx, key)
		if err != nil || proto.Unmarshal(e.Value(), cat) != nil {
			return false
		}
		return cat.GetExpiresAt().AsTime().After(time.Now().Add(50 * time.Minute))
	}, 10*time.Second, 20*time.Millisecond, "a fresh hour")
	assert.Equal(t, 2, up.Count("/v1/models"), "fetched once")
}

// A provider without a model listing answers 400 on its connection's models.
func TestConnectionModelsWithoutAListing(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	id := sb.CreateConnection(t, map[string]any{"provider": "elevenlabs", "name": "voices", "apiKey": "xi-key",
		"providerSpecificData": map[string]any{"baseUrl": "http://127.0.0.1:1"}})
	r := sb.Admin(t, http.MethodGet, "/api/providers/"+id+"/models", nil)
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	assert.Equal(t, "no_model_listing", errorCode(r))
}

// /v1/models and /v1/models/info show only what a request may name: a
// combo none of whose models a connection serves is left out, and so are
// the models of a connection that needs a new login (its token refresh
// failed), with the combos that relied on them, while routing refuses it.
func TestModelsShowOnlyWhatIsServed(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	id := sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini"}}})
	r := sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{
		{"name": "best", "models": []string{"anthropic/claude-sonnet-4", "openai/gpt-4o-mini"}},
		{"name": "ghost", "models": []string{"anthropic/claude-sonnet-4", "openai/gpt-4o"}},
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	assert.ElementsMatch(t, []string{"best", "openai/gpt-4o-mini"}, keys(listing(t, sb, "/v1/models")))
	info := sb.Do(t, http.MethodGet, "/v1/models/info?id=best", nil)
	assert.Equal(t, http.StatusOK, info.Status, "%s", info.Body)
	info = sb.Do(t, http.MethodGet, "/v1/models/info?id=ghost", nil)
	assert.Equal(t, http.StatusNotFound, info.Status, "%s", info.Body)
	assert.Equal(t, "model_not_found", errorCode(info))

	// The token refresh fails for good: the connection stays active and
	// needs a new login.
	kv := connectionsKV(t, sb)
	ctx := context.Background()
	key := sb.Node.DefaultMachineID() + "." + id
	e, err := kv.Get(ctx, key)
	require.NoError(t, err)
	c := new(busv1.Connection)
	require.NoError(t, proto.Unmarshal(e.Value(), c))
	c.Oauth = &busv1.OAuthState{NeedsRelogin: true, TokenUrl: "https://auth.example/token"}
	data, err := proto.Marshal(c)
	require.NoError(t, err)
	_, err = kv.Update(ctx, key, data, e.Revision())
	require.NoError(t, err)

	require.Eventually(t, func() bool { return len(listing(t, sb, "/v1/models")) == 0 }, 5*time.Second, 10*time.Millisecond,
		"a connection that needs a new login lists nothing")
	chat := sb.Do(t, http.MethodPost, pathChat, map[string]any{"model": "openai/gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	assert.NotEqual(t, http.StatusOK, chat.Status, "routing refuses the connection: %s", chat.Body)
	for _, id := range []string{"openai/gpt-4o-mini", "best"} {
		info := sb.Do(t, http.MethodGet, "/v1/models/info?id="+id, nil)
		assert.Equal(t, http.StatusNotFound, info.Status, "%s: %s", id, info.Body)
		assert.Equal(t, "model_not_found", errorCode(info), id)
	}
}

// The workers' consumers deleted under them (an operator's `nats consumer
// rm`, a stream made again) are created again: a connection added then gets
// its catalog, and a request is rolled up into the usage statistics. The
// catalog refreshes' consumption ended silently (no refresh ran until the
// process restarted), and the roll-up asked the deleted consumer for events
// without a pause, for ever.
func TestDeletedWorkerConsumersAreCreatedAgain(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	ctx := context.Background()
	for stream, durable := range map[string]string{spine.StreamJobs: "catalog-refresh", spine.StreamUsage: "usage-rollup"} {
		// Deleted while the workers' pull waits on it, as a running
		// process's consumer is (one deleted as a pull is on its way is
		// found out only once its heartbeats went missing, 30 s on).
		require.Eventually(t, func() bool {
			cons, err := js.Consumer(ctx, stream, durable)
			return err == nil && cons.CachedInfo().NumWaiting > 0
		}, 10*time.Second, 5*time.Millisecond, "the workers pull from %s", durable)
		require.NoError(t, js.DeleteConsumer(ctx, stream, durable))
	}

	up := upstreamtest.New(t, upstreamtest.WithModels("qwen2.5-coder"), upstreamtest.WithEmbeddingDims(8))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-lab", "name": "lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "lab"}})
	want := []string{"lab/qwen2.5-coder"}
	assert.Eventually(t, func() bool { return slices.Equal(sb.ModelIDs(t), want) }, 20*time.Second, 100*time.Millisecond)
	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "lab/qwen2.5-coder", "input": "x"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Eventually(t, func() bool { return rolledUp(t, sb) == 1 }, 20*time.Second, 100*time.Millisecond)
}

// A listing asked for a kind the gateway does not know names the parameter,
// as GetModelInfo does, on gRPC and on the query of GET /v1/models, where
// it answered NOT_FOUND (404) with no parameter named.
func TestModelsUnknownKindNamesParam(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	conn, err := grpc.NewClient(sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	_, err = corev1.NewRouterClient(conn).ListModels(context.Background(), &corev1.ListModelsRequest{Kind: "holograms"})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Equal(t, "invalid_value", errorInfoOf(err).GetReason())
	assert.Equal(t, "kind", errorInfoOf(err).GetMetadata()["param"])

	r := sb.Do(t, http.MethodGet, "/v1/models?kind=holograms", nil)
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	assert.Equal(t, "invalid_value", errorCode(r))
	assert.Equal(t, "kind", r.JSON["error"].(map[string]any)["param"])
	assert.Equal(t, http.StatusNotFound, sb.Do(t, http.MethodGet, "/v1/models/holograms", nil).Status, "a path names a model")
}

// A worker fetches a new connection's live catalog through a core replica
// that has not caught up with the connection yet (its link to NATS stalled
// for a moment, as on a loaded machine): the replica tells it to try again,
// not that the connection (or its new machine) is gone, and the models are
// listed once the replica catches up. Told the connection was gone, the
// worker ended the job with nothing fetched, and every listing of the next
// two minutes went without the models: the fetches it asked for were
// copies of that job, dropped by the queue's de-duplication.
func TestCatalogFetchedThroughAReplicaThatLags(t *testing.T) {
	for _, newMachine := range []bool{false, true} {
		t.Run(fmt.Sprintf("new machine %v", newMachine), func(t *testing.T) {
			natsURL := nodetest.StartNATS(t)
			link := newStallingLink(t, natsURL)
			up := upstreamtest.New(t, upstreamtest.WithModels("qwen2.5-coder"))
			split := func(natsURL string) config.Config {
				cfg := nodetest.Config(t.TempDir())
				cfg.NATSURL, cfg.SecretKey = natsURL, testSecretKey
				return cfg
			}
			writer := nodetest.Start(t, split(natsURL), node.RoleCore)
			lagging := nodetest.Start(t, split(link.URL()), node.RoleCore)
			workerCfg := split(natsURL)
			workerCfg.CoreAddr = lagging.Node.GRPCAddr()
			nodetest.Start(t, workerCfg, node.RoleWorker)
			edgeCfg := nodetest.Config(t.TempDir())
			edgeCfg.CoreAddr = writer.Node.GRPCAddr()
			edge := nodetest.Start(t, edgeCfg, node.RoleEdge)

			link.Stall()
			var machine, auth []string
			if newMachine {
				m := edge.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "team"})
				require.Equal(t, http.StatusCreated, m.Status, "%s", m.Body)
				machine = []string{"X-Switchboard-Machine", m.JSON["machine"].(map[string]any)["id"].(string)}
				k := edge.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "team"}, machine...)
				require.Equal(t, http.StatusCreated, k.Status, "%s", k.Body)
				auth = []string{"Authorization", "Bearer " + k.JSON["key"].(string)}
			}
			r := edge.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai-compatible-lab", "name": "lab",
				"providerSpecificData": map[string]any{"baseUrl": up.URL()}}, machine...)
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			t.Logf("listing while the replica lags: %v", edge.ModelIDs(t, auth...))
			link.Resume()

			want := []string{"openai-compatible-lab/qwen2.5-coder"}
			var got []string
			assert.Eventually(t, func() bool { got = edge.ModelIDs(t, auth...); return slices.Equal(got, want) }, 30*time.Second, 100*time.Millisecond,
				"the listing shows the models once the replica caught up (last: %v, upstream listed %d times)", got, up.Count("/v1/models"))
		})
	}
}
