package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// requirePrefixTaken checks a refusal of a prefix that names another
// provider's models: 409 in the admin routes' error shape, naming the
// prefix, never a key.
func requirePrefixTaken(t *testing.T, r nodetest.Response, param, prefix string) {
	t.Helper()
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	e, _ := r.JSON["error"].(map[string]any)
	assert.Equal(t, "prefix_taken", e["code"], "%s", r.Body)
	assert.Equal(t, "invalid_request_error", e["type"])
	assert.Equal(t, param, e["param"])
	assert.Contains(t, e["message"], "'"+prefix+"'")
	assert.NotContains(t, string(r.Body), "sk-")
}

// A connection's prefix is where model ids reach it: one that names a
// registry provider, or the models of another provider's connection, is
// refused on create and on update, where it was taken and requests for the
// other provider's models went to whichever came first. Connections of one
// provider share a prefix, as a second key does.
func TestPrefixOfAnotherProviderIsRefused(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	oa, lab, other := upstreamtest.New(t), upstreamtest.New(t), upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "work", "apiKey": "sk-work", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": oa.URL()}})

	create := func(providerID, name, prefix string) nodetest.Response {
		t.Helper()
		return sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": providerID, "name": name, "apiKey": "sk-other",
			"priority": 1, "providerSpecificData": map[string]any{"baseUrl": other.URL(), "prefix": prefix}})
	}
	requirePrefixTaken(t, create("openai-compatible-other", "dup2", "openai"), "providerSpecificData.prefix", "openai")
	requirePrefixTaken(t, create("openai-compatible-other", "dup3", "anthropic"), "providerSpecificData.prefix", "anthropic")
	requirePrefixTaken(t, create("openai-compatible-other", "dup4", "copilot"), "providerSpecificData.prefix", "copilot")
	requirePrefixTaken(t, create("openai", "dup5", "openrouter"), "providerSpecificData.prefix", "openrouter")

	// Two keys of one compatible provider share its prefix.
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-lab", "name": "lab", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": lab.URL(), "prefix": "local"}})
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-lab", "name": "lab-2", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": lab.URL(), "prefix": "local"}})
	// And two keys of OpenAI, the second naming its own prefix.
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "work-2", "apiKey": "sk-work-2", "priority": 3,
		"providerSpecificData": map[string]any{"baseUrl": oa.URL(), "prefix": "openai"}})

	r := create("openai-compatible-other", "dup6", "local")
	requirePrefixTaken(t, r, "providerSpecificData.prefix", "local")
	assert.Contains(t, r.JSON["error"].(map[string]any)["message"], "openai-compatible-lab")
	requirePrefixTaken(t, create("openai-compatible-other", "dup7", "openai-compatible-lab"), "providerSpecificData.prefix", "openai-compatible-lab")
	otherID := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-other", "name": "other", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": other.URL(), "prefix": "openai-compatible-later"}})
	// A provider id, which names its connections' models too, that is
	// another provider's connection's prefix.
	requirePrefixTaken(t, create("openai-compatible-later", "later", ""), "provider", "openai-compatible-later")
	requirePrefixTaken(t, create("openai-compatible-later", "later", "later"), "provider", "openai-compatible-later")

	// Update: the same refusals; the prefix it has, sent back, is kept.
	patch := func(body map[string]any) nodetest.Response {
		t.Helper()
		return sb.Admin(t, http.MethodPatch, "/api/providers/"+otherID, body)
	}
	requirePrefixTaken(t, patch(map[string]any{"providerSpecificData": map[string]any{"prefix": "openai"}}), "providerSpecificData.prefix", "openai")
	requirePrefixTaken(t, patch(map[string]any{"providerSpecificData": map[string]any{"prefix": "local"}}), "providerSpecificData.prefix", "local")
	p := patch(map[string]any{"name": "other-renamed", "providerSpecificData": map[string]any{"prefix": "openai-compatible-later"}})
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	p = patch(map[string]any{"providerSpecificData": map[string]any{"prefix": "other"}})
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)

	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	require.Equal(t, http.StatusOK, list.Status)
	assert.Len(t, list.JSON["connections"], 5, "no refused connection was stored")
	prefixes := map[string]string{}
	for _, c := range list.JSON["connections"].([]any) {
		c := c.(map[string]any)
		prefix, _ := c["providerSpecificData"].(map[string]any)["prefix"].(string)
		prefixes[c["name"].(string)] = prefix
	}
	assert.Equal(t, map[string]string{"work": "", "work-2": "openai", "lab": "local", "lab-2": "local", "other-renamed": "other"}, prefixes)

	requireAnswer(t, chatAsk(t, sb, "openai/gpt-4o", "hello", false), "hello")
	assert.Equal(t, []string{"gpt-4o"}, chatModels(t, oa), "openai/* reaches OpenAI")
	requireAnswer(t, chatAsk(t, sb, "local/llama3", "hello", false), "hello")
	assert.Equal(t, []string{"llama3"}, chatModels(t, lab), "local/* reaches the lab")
	assert.Empty(t, chatModels(t, other))
}

// Connections stored before clashing prefixes were refused keep loading and
// serving as before (the first by priority takes the prefix), and can still
// be edited as long as their prefix stays.
func TestStoredPrefixClashKeepsServing(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	oa, other := upstreamtest.New(t), upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "work", "apiKey": "sk-work", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": oa.URL()}})
	machine := sb.Node.DefaultMachineID()
	id := uuid.NewString()
	data, err := proto.Marshal(&busv1.Connection{
		Id: id, MachineId: machine, Provider: "openai-compatible-other", Name: "dup2", Priority: 1, IsActive: true,
		Data:      &busv1.ProviderData{BaseUrl: other.URL(), Prefix: "openai"},
		CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(),
	})
	require.NoError(t, err)
	_, err = connectionsKV(t, sb).Create(context.Background(), machine+"."+id, data)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		return chatAsk(t, sb, "openai/gpt-4o", "hello", false).Status == http.StatusOK && len(chatModels(t, other)) > 0
	}, 10*time.Second, 20*time.Millisecond, "the stored connection serves its prefix as before")
	// Asked before core loaded the stored connection, "work" answered;
	// once it is loaded, the stored one (priority 1) takes every request.
	toWork, toOther := len(chatModels(t, oa)), len(chatModels(t, other))
	for range 3 {
		requireAnswer(t, chatAsk(t, sb, "openai/gpt-4o", "hello", false), "hello")
	}
	assert.Len(t, chatModels(t, oa), toWork, "openai/* no longer reaches the connection without a prefix")
	assert.Len(t, chatModels(t, other), toOther+3)

	p := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"name": "dup2-renamed", "providerSpecificData": map[string]any{"prefix": "openai"}})
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	p = sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"prefix": "mine"}})
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	requirePrefixTaken(t, sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"prefix": "openai"}}),
		"providerSpecificData.prefix", "openai")
	require.Eventually(t, func() bool {
		return chatAsk(t, sb, "openai/gpt-4o", "hello", false).Status == http.StatusOK && len(chatModels(t, oa)) > 0
	}, 10*time.Second, 20*time.Millisecond, "openai/* reaches OpenAI once the prefix is mended")
}

// "claude", the provider id of Claude subscriptions, stays free as the
// prefix of an Anthropic connection, as it was before there were any: a
// claude connection then shares it, as a second key would.
func TestClaudePrefixStaysFreeForAnthropicConnections(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	r := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "anthropic", "name": "api-key", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude"}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	// Another provider's connection still cannot take it from the
	// Anthropic one.
	r = sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai-compatible-lab", "name": "lab", "apiKey": "sk-lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude"}})
	requirePrefixTaken(t, r, "providerSpecificData.prefix", "claude")
}
