package node_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

func errorCode(r nodetest.Response) string {
	e, _ := r.JSON["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errorType(r nodetest.Response) string {
	e, _ := r.JSON["error"].(map[string]any)
	c, _ := e["type"].(string)
	return c
}

func TestAdminAuth(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	cases := []struct {
		name    string
		headers []string
		status  int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"wrong token", []string{"Authorization", "Bearer not-the-admin-token"}, http.StatusUnauthorized},
		{"wrong scheme", []string{"Authorization", "Basic " + nodetest.AdminToken}, http.StatusUnauthorized},
		{"right token", []string{"Authorization", "Bearer " + nodetest.AdminToken}, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := sb.Do(t, http.MethodGet, "/api/providers", nil, tc.headers...)
			require.Equal(t, tc.status, resp.Status, "%s", resp.Body)
			if tc.status == http.StatusUnauthorized {
				assert.Equal(t, "authentication_error", errorType(resp))
				assert.Equal(t, "invalid_admin_token", errorCode(resp))
				assert.NotContains(t, string(resp.Body), nodetest.AdminToken)
			}
		})
	}
	t.Run("unknown machine", func(t *testing.T) {
		resp := sb.Admin(t, http.MethodGet, "/api/providers", nil, "X-Switchboard-Machine", "0123456789abcdef")
		assert.Equal(t, http.StatusNotFound, resp.Status)
		assert.Equal(t, "machine_not_found", errorCode(resp))
	})
}

// Bad input gets a 4xx in the OpenAI error shape and stores nothing.
func TestAdminRejectsBadConnections(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"invalid json", `{"provider": "openai",`, http.StatusBadRequest, ""},
		{"unknown provider", map[string]any{"provider": "acme", "name": "x"}, http.StatusBadRequest, "unknown_provider"},
		{"missing provider", map[string]any{"name": "x"}, http.StatusBadRequest, "missing_required_parameter"},
		{"missing name", map[string]any{"provider": "openai"}, http.StatusBadRequest, "missing_required_parameter"},
		{"base url not http", map[string]any{"provider": "openai", "name": "x", "providerSpecificData": map[string]any{"baseUrl": "ftp://example.com"}}, http.StatusBadRequest, "invalid_base_url"},
		{"base url not a url", map[string]any{"provider": "openai", "name": "x", "providerSpecificData": map[string]any{"baseUrl": "localhost"}}, http.StatusBadRequest, "invalid_base_url"},
		{"compatible without base url", map[string]any{"provider": "openai-compatible-x", "name": "x"}, http.StatusBadRequest, "missing_required_parameter"},
		{"bad prefix", map[string]any{"provider": "openai", "name": "x", "providerSpecificData": map[string]any{"prefix": "a/b"}}, http.StatusBadRequest, "invalid_prefix"},
		{"wrong field type", map[string]any{"provider": "openai", "name": "x", "priority": "high"}, http.StatusBadRequest, ""},
		{"hosted provider without a key", map[string]any{"provider": "openai", "name": "x"}, http.StatusBadRequest, "missing_required_parameter"},
		{"hosted provider with an empty key", map[string]any{"provider": "openrouter", "name": "x", "apiKey": ""}, http.StatusBadRequest, "missing_required_parameter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := sb.Admin(t, http.MethodPost, "/api/providers", tc.body)
			require.Equal(t, tc.status, resp.Status, "%s", resp.Body)
			assert.Equal(t, "invalid_request_error", errorType(resp), "%s", resp.Body)
			if tc.code != "" {
				assert.Equal(t, tc.code, errorCode(resp), "%s", resp.Body)
			}
		})
	}
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Empty(t, list.JSON["connections"], "nothing stored")

	for _, method := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
		resp := sb.Admin(t, method, "/api/providers/does-not-exist", map[string]any{"name": "y"})
		assert.Equal(t, http.StatusNotFound, resp.Status, method)
		assert.Equal(t, "connection_not_found", errorCode(resp), method)
	}
}

func TestAdminConnectionLifecycle(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	// OpenRouter's live catalog, from a fake of its /models.
	up := upstreamtest.New(t, upstreamtest.WithModels("openai/gpt-4o-mini", "meta-llama/llama-3.1-8b-instruct"))
	id := sb.CreateConnection(t, map[string]any{
		"provider": "openrouter", "name": "or", "apiKey": "sk-or-secret-value", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})
	get := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil)
	require.Equal(t, http.StatusOK, get.Status)
	assert.NotContains(t, string(get.Body), "sk-or-secret-value", "secrets never come back")
	c := get.JSON["connection"].(map[string]any)
	assert.Equal(t, true, c["hasApiKey"])
	assert.Equal(t, true, c["isActive"], "active by default")
	assert.EqualValues(t, 2, c["priority"])

	patch := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{
		"isActive": false, "providerSpecificData": map[string]any{"prefix": "router"},
	})
	require.Equal(t, http.StatusOK, patch.Status, "%s", patch.Body)
	c = patch.JSON["connection"].(map[string]any)
	assert.Equal(t, false, c["isActive"])
	assert.Equal(t, "or", c["name"], "fields not in the patch are kept")
	assert.Equal(t, "router", c["providerSpecificData"].(map[string]any)["prefix"])
	assert.Empty(t, sb.ModelIDs(t), "an inactive connection lists nothing")

	patch = sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"isActive": true})
	require.Equal(t, http.StatusOK, patch.Status)
	assert.ElementsMatch(t, []string{"router/openai/gpt-4o-mini", "router/meta-llama/llama-3.1-8b-instruct"}, sb.ModelIDs(t),
		"the live catalog, with the prefix in place of the provider in ids")

	bad := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"baseUrl": "nope"}})
	assert.Equal(t, http.StatusBadRequest, bad.Status)

	del := sb.Admin(t, http.MethodDelete, "/api/providers/"+id, nil)
	require.Equal(t, http.StatusOK, del.Status)
	assert.Equal(t, true, del.JSON["deleted"])
	assert.Empty(t, sb.ModelIDs(t))
}

var keyFormat = regexp.MustCompile(`^sk-[0-9a-f]{16}-[a-z0-9]{6}-[A-Za-z0-9]{32}$`)

func TestAPIKeysAndRequireAPIKey(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-x"})

	missing := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{})
	assert.Equal(t, http.StatusBadRequest, missing.Status)

	created := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "ci"})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	key := created.JSON["key"].(string)
	assert.Regexp(t, keyFormat, key)
	assert.Equal(t, sb.Node.DefaultMachineID(), created.JSON["machineId"])
	assert.Equal(t, "ci", created.JSON["name"])

	list := sb.Admin(t, http.MethodGet, "/api/keys", nil)
	require.Equal(t, http.StatusOK, list.Status)
	assert.NotContains(t, string(list.Body), key, "raw keys are shown once only")
	assert.Len(t, list.JSON["keys"], 1)

	// Keys are optional until required; a key that is sent is always checked.
	assert.NotEmpty(t, sb.ModelIDs(t))
	for _, h := range [][]string{
		{"Authorization", "Bearer " + key}, {"x-api-key", key}, {"x-goog-api-key", key},
	} {
		assert.NotEmpty(t, sb.ModelIDs(t, h...), h[0])
	}
	bad := sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer sk-0123456789abcdef-abcdef-00000000")
	assert.Equal(t, http.StatusUnauthorized, bad.Status)
	assert.Equal(t, "invalid_api_key", errorCode(bad))

	settings := sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": true})
	require.Equal(t, http.StatusOK, settings.Status, "%s", settings.Body)
	assert.Equal(t, true, settings.JSON["requireApiKey"])
	assert.Equal(t, "full", settings.JSON["cavemanLevel"], "other settings keep their defaults")

	none := sb.Do(t, http.MethodGet, "/v1/models", nil)
	assert.Equal(t, http.StatusUnauthorized, none.Status)
	assert.Equal(t, "missing_api_key", errorCode(none))
	assert.NotEmpty(t, sb.ModelIDs(t, "Authorization", "Bearer "+key))

	del := sb.Admin(t, http.MethodDelete, "/api/keys/"+created.JSON["id"].(string), nil)
	require.Equal(t, http.StatusOK, del.Status)
	revoked := sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+key)
	assert.Equal(t, http.StatusUnauthorized, revoked.Status, "a revoked key is refused")
}

// REQUIRE_API_KEY forces keys whatever the machine's setting says.
func TestRequireAPIKeyFromEnvironment(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.RequireAPIKey = true
	sb := nodetest.Start(t, cfg, "core", "edge", "worker")
	resp := sb.Do(t, http.MethodGet, "/v1/models", nil)
	assert.Equal(t, http.StatusUnauthorized, resp.Status)
	s := sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": false})
	assert.Equal(t, true, s.JSON["requireApiKey"], "the environment wins")
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/v1/models", nil).Status)
}

func TestSettingsValidation(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	for _, body := range []map[string]any{
		{"cavemanLevel": "loud"},
		{"routingStrategy": "random"},
		{"stickyLimit": 0},
	} {
		resp := sb.Admin(t, http.MethodPatch, "/api/settings", body)
		assert.Equal(t, http.StatusBadRequest, resp.Status, "%v", body)
		assert.Equal(t, "invalid_value", errorCode(resp))
	}
	ok := sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"cavemanEnabled": true, "cavemanLevel": "ultra"})
	require.Equal(t, http.StatusOK, ok.Status)
	got := sb.Admin(t, http.MethodGet, "/api/settings", nil)
	assert.Equal(t, true, got.JSON["cavemanEnabled"])
	assert.Equal(t, "ultra", got.JSON["cavemanLevel"])
	assert.Equal(t, "fill-first", got.JSON["routingStrategy"])
}

func TestMachinesAreTenants(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	m := sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "team-b"})
	require.Equal(t, http.StatusCreated, m.Status, "%s", m.Body)
	id := m.JSON["machine"].(map[string]any)["id"].(string)
	assert.Regexp(t, `^[0-9a-f]{16}$`, id)

	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "a", "apiKey": "x", "providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o"}}})
	resp := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openrouter", "name": "b", "apiKey": "y",
		"providerSpecificData": map[string]any{"enabledModels": []string{"openai/gpt-4o-mini"}}}, "X-Switchboard-Machine", id)
	require.Equal(t, http.StatusCreated, resp.Status)
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "b"}, "X-Switchboard-Machine", id)
	require.Equal(t, http.StatusCreated, key.Status)

	assert.Equal(t, []string{"openai/gpt-4o"}, sb.ModelIDs(t), "no key: the default machine")
	assert.Equal(t, []string{"openrouter/openai/gpt-4o-mini"}, sb.ModelIDs(t, "Authorization", "Bearer "+key.JSON["key"].(string)),
		"the key's machine id selects its connections")

	list := sb.Admin(t, http.MethodGet, "/api/machines", nil)
	assert.Len(t, list.JSON["machines"], 2)
}

// Internal services call core over gRPC directly, with the same auth.
func TestGRPCClients(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	conn, err := grpc.NewClient(sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	admin := corev1.NewAdminClient(conn)
	router := corev1.NewRouterClient(conn)
	ctx := context.Background()

	_, err = admin.ListConnections(ctx, &corev1.ListConnectionsRequest{})
	assert.Equal(t, codes.Unauthenticated, status.Code(err))

	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+nodetest.AdminToken)
	created, err := admin.CreateConnection(actx, &corev1.CreateConnectionRequest{
		Provider: "openai", Name: "grpc", ApiKey: "sk-secret",
		ProviderSpecificData: &corev1.ProviderSpecificData{EnabledModels: []string{"whisper-1", "tts-1"}},
	})
	require.NoError(t, err)
	assert.True(t, created.GetConnection().GetHasApiKey())

	all, err := router.ListModels(ctx, &corev1.ListModelsRequest{})
	require.NoError(t, err)
	assert.Len(t, all.GetData(), 2)
	stt, err := router.ListModels(ctx, &corev1.ListModelsRequest{Kind: "stt"})
	require.NoError(t, err)
	require.Len(t, stt.GetData(), 1)
	assert.Equal(t, "openai/whisper-1", stt.GetData()[0].GetId())

	_, err = router.ListModels(ctx, &corev1.ListModelsRequest{Kind: "hologram"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}
