package node_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// GET /v1/models/{id} is OpenAI's "retrieve model", for ids with slashes,
// aliases and combos, beside the listing of one kind at /v1/models/{kind}.
func TestRetrieveModel(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini", "text-embedding-3-small"}}})
	sb.CreateConnection(t, map[string]any{"provider": "openrouter", "name": "or", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"openai/gpt-4o"}}})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/aliases",
		map[string]any{"aliases": map[string]string{"fast": "openai/gpt-4o-mini"}}).Status)
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "sdk"}).JSON["key"].(string)

	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	for _, tt := range []struct{ id, ownedBy, kind string }{
		{"openai/gpt-4o-mini", "openai", "llm"},
		{"openai/text-embedding-3-small", "openai", "embedding"},
		{"openrouter/openai/gpt-4o", "openrouter", "llm"},
		{"fast", "alias", "llm"},
	} {
		m, err := client.Models.Get(ctx, tt.id)
		require.NoError(t, err, tt.id)
		assert.Equal(t, tt.id, m.ID)
		assert.EqualValues(t, "model", m.Object)
		assert.Equal(t, tt.ownedBy, m.OwnedBy, tt.id)
		assert.Equal(t, `"`+tt.kind+`"`, m.JSON.ExtraFields["kind"].Raw(), tt.id)
	}

	// A client that escapes the id's slashes gets the same model.
	esc := sb.Do(t, http.MethodGet, "/v1/models/openrouter%2Fopenai%2Fgpt-4o", nil, "Authorization", "Bearer "+key)
	require.Equal(t, http.StatusOK, esc.Status, "%s", esc.Body)
	assert.Equal(t, "openrouter/openai/gpt-4o", esc.JSON["id"])

	_, err := client.Models.Get(ctx, "acme/nothing")
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)
	assert.Equal(t, "model_not_found", apiErr.Code)
	r := sb.Do(t, http.MethodGet, "/v1/models/openai/gpt-4o-mini", nil, "Authorization", "Bearer sk-0123456789abcdef-abc123-00000000")
	assert.Equal(t, http.StatusUnauthorized, r.Status, "a key that is sent is checked")
	assert.Equal(t, "invalid_api_key", errorCode(r))

	// The kinds keep their listings, and the model info its route.
	assert.Equal(t, []string{"openai/text-embedding-3-small"}, keys(listing(t, sb, "/v1/models/embedding")))
	info := sb.Do(t, http.MethodGet, "/v1/models/info?id=openai/gpt-4o-mini", nil)
	assert.Equal(t, http.StatusOK, info.Status)
	assert.Equal(t, "/v1/chat/completions", info.JSON["endpoint"])

	// So an alias or combo named like a kind or "info" could never be
	// retrieved: such names are refused, and nothing changes.
	for _, name := range []string{"llm", "embedding", "info"} {
		r := sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": map[string]string{name: "openai/gpt-4o-mini"}})
		assert.Equal(t, http.StatusBadRequest, r.Status, "alias %s: %s", name, r.Body)
		assert.Contains(t, string(r.Body), "reserved", name)
		r = sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{{"name": name, "models": []string{"openai/gpt-4o-mini"}}}})
		assert.Equal(t, http.StatusBadRequest, r.Status, "combo %s: %s", name, r.Body)
	}
	assert.Equal(t, map[string]any{"fast": "openai/gpt-4o-mini"}, sb.Admin(t, http.MethodGet, "/api/models/aliases", nil).JSON["aliases"])
}

// The official npm client's models.retrieve, which escapes the id's slashes.
func TestNPMModelsRetrieve(t *testing.T) {
	sb, _, key := npmGateway(t)
	results := sb.NPMClient(key).Ops(t, "models.mjs",
		map[string]any{"op": "retrieve", "id": "openai/text-embedding-3-small"},
		map[string]any{"op": "retrieve", "id": "acme/nothing"})
	var m struct {
		modelEntry
		Kind string `json:"kind"`
	}
	results[0].Decode(t, &m)
	assert.Equal(t, modelEntry{ID: "openai/text-embedding-3-small", Object: "model", OwnedBy: "openai"}, m.modelEntry)
	assert.Equal(t, "embedding", m.Kind)
	require.NotNil(t, results[1].Error)
	assert.Equal(t, "NotFoundError", results[1].Error.Class)
	assert.Equal(t, "model_not_found", results[1].Error.Code)
}
