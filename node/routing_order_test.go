package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Two keys of one provider in priority order, the first's project without
// access to a model the second's has: the first key's upstream lists the
// model out of its /models and answers 404 model_not_found to it, which is
// no reason to fall back. A request for the model named bare goes to the
// second key, whose live list names it; a model both or neither list, or
// one asked before any list is known, still goes to the first.
func TestBareModelGoesFirstToTheConnectionListingIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider string
		// shared is listed by both keys, only by the second, static by the
		// registry and listed by neither.
		shared, only, static string
		// fetch has the connections' catalogs fetched.
		fetch func(t *testing.T, sb *nodetest.Instance, ids []string)
	}{
		{name: "openrouter", provider: "openrouter",
			shared: "acme/small", only: "acme/large", static: "meta-llama/llama-3.3-70b-instruct",
			// OpenRouter's models are listed live: the listing fetches them.
			fetch: func(t *testing.T, sb *nodetest.Instance, _ []string) {
				require.Contains(t, sb.ModelIDs(t), "openrouter/acme/large")
			}},
		{name: "openai", provider: "openai",
			shared: "gpt-4o-mini", only: "gpt-5.2-pro", static: "gpt-4o",
			// OpenAI's are fetched when the console looks at a connection's.
			fetch: func(t *testing.T, sb *nodetest.Instance, ids []string) {
				for _, id := range ids {
					r := sb.Admin(t, http.MethodGet, "/api/providers/"+id+"/models", nil)
					require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			first := upstreamtest.New(t, upstreamtest.WithModels(tc.shared))
			second := upstreamtest.New(t, upstreamtest.WithModels(tc.shared, tc.only))
			var ids []string
			for i, up := range []*upstreamtest.Server{first, second} {
				ids = append(ids, sb.CreateConnection(t, map[string]any{"provider": tc.provider, "name": tc.name + string(rune('1'+i)),
					"apiKey": "sk-key", "priority": i + 1, "providerSpecificData": map[string]any{"baseUrl": up.URL()}}))
			}
			ask := func(model string) {
				t.Helper()
				requireAnswer(t, chatAsk(t, sb, model, "hello", false), "hello")
			}
			counts := func() [2]int {
				return [2]int{first.Count(upstreamtest.PathChatCompletions), second.Count(upstreamtest.PathChatCompletions)}
			}

			if tc.provider == "openai" {
				ask(tc.static)
				require.Equal(t, [2]int{1, 0}, counts(), "no catalog known: the first by priority")
			}
			tc.fetch(t, sb, ids)
			before := counts()
			ask(tc.shared)
			ask(tc.static)
			require.Equal(t, [2]int{before[0] + 2, before[1]}, counts(), "a model both or neither list: the first by priority")

			// The first key has no access to the model.
			first.SetDefault(upstreamtest.PathChatCompletions, upstreamtest.OpenAIError(http.StatusNotFound, "invalid_request_error",
				"model_not_found", "The model `"+tc.only+"` does not exist or you do not have access to it."))
			before = counts()
			for range 3 {
				ask(tc.only)
			}
			assert.Equal(t, [2]int{before[0], before[1] + 3}, counts(), "the model goes to the key whose list names it")
		})
	}
}

// The order holds past the hour a fetched catalog is kept: a list the
// console fetched for a key of a provider without a live catalog (OpenAI's)
// is fetched again before it expires, as a live catalog is, so the model
// the first key's project cannot use still goes to the second key, where
// once the lists expired both keys' lists were unknown, the first by
// priority was asked again and every request for the model answered 404.
func TestListedOrderOutlastsTheCatalogsHour(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.CatalogScanEvery = 50 * time.Millisecond
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	first := upstreamtest.New(t, upstreamtest.WithModels("gpt-4o-mini"))
	second := upstreamtest.New(t, upstreamtest.WithModels("gpt-4o-mini", "gpt-5.2-pro"))
	var ids []string
	for i, up := range []*upstreamtest.Server{first, second} {
		ids = append(ids, sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "key" + string(rune('1'+i)),
			"apiKey": "sk-key", "priority": i + 1, "providerSpecificData": map[string]any{"baseUrl": up.URL()}}))
		r := sb.Admin(t, http.MethodGet, "/api/providers/"+ids[i]+"/models", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	first.SetDefault(upstreamtest.PathChatCompletions, upstreamtest.OpenAIError(http.StatusNotFound, "invalid_request_error",
		"model_not_found", "The model `gpt-5.2-pro` does not exist or you do not have access to it."))
	requireAnswer(t, chatAsk(t, sb, "gpt-5.2-pro", "hello", false), "hello")

	// An hour on, the catalogs the console fetched have run out.
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, spine.BucketCatalogs)
	require.NoError(t, err)
	for _, id := range ids {
		key := sb.Node.DefaultMachineID() + "." + id
		e, err := kv.Get(ctx, key)
		require.NoError(t, err)
		cat := &busv1.Catalog{}
		require.NoError(t, proto.Unmarshal(e.Value(), cat))
		cat.ExpiresAt = timestamppb.New(time.Now().Add(-time.Second))
		data, err := proto.Marshal(cat)
		require.NoError(t, err)
		_, err = kv.Put(ctx, key, data)
		require.NoError(t, err)
	}
	assert.Eventually(t, func() bool { return first.Count("/v1/models") > 1 && second.Count("/v1/models") > 1 },
		10*time.Second, 20*time.Millisecond, "the lists were fetched again")
	var last chatReply
	assert.Eventually(t, func() bool {
		last = chatAsk(t, sb, "gpt-5.2-pro", "hello", false)
		return last.Status == http.StatusOK
	}, 10*time.Second, 100*time.Millisecond, "the model goes to the key whose list names it")
	assert.Equal(t, http.StatusOK, last.Status, "%s", last.Body)
}
