package node_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The official openai npm client, driven through node, against a gateway
// configured through its admin API with one OpenAI connection to a fake
// upstream.

const npmDims = 8

// npmGateway starts an instance with one "openai" connection to a fake
// upstream and an API key, and returns them.
func npmGateway(t *testing.T) (*nodetest.Instance, *upstreamtest.Server, string) {
	t.Helper()
	nodetest.NPM(t) // skip (or fail on CI) before starting anything
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(npmDims))
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{
		"provider": "openai", "name": "openai", "apiKey": "sk-x",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "npm"})
	require.Equal(t, http.StatusCreated, key.Status, "%s", key.Body)
	return sb, up, key.JSON["key"].(string)
}

// embeddingsResult is the SDK's CreateEmbeddingResponse, vectors decoded.
type embeddingsResult struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage *struct {
		PromptTokens *int `json:"prompt_tokens"`
		TotalTokens  *int `json:"total_tokens"`
	} `json:"usage"`
}

func TestNPMEmbeddings(t *testing.T) {
	sb, up, key := npmGateway(t)
	const model = "openai/text-embedding-3-small"
	cases := []struct {
		name   string
		params map[string]any
		inputs []string
	}{
		{"default encoding, one string", map[string]any{"input": "hello gateway"}, []string{"hello gateway"}},
		{"default encoding, array", map[string]any{"input": []string{"first", "second one", "third"}}, []string{"first", "second one", "third"}},
		{"float, one string", map[string]any{"input": "as floats", "encoding_format": "float"}, []string{"as floats"}},
		{"float, array", map[string]any{"input": []string{"a", "b c"}, "encoding_format": "float"}, []string{"a", "b c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.params["model"] = model
			before := len(up.Requests())
			var got embeddingsResult
			sb.NPMClient(key).Op(t, "embeddings.mjs", tc.params).Decode(t, &got)

			assert.Equal(t, "list", got.Object)
			require.Len(t, got.Data, len(tc.inputs))
			for i, in := range tc.inputs {
				assert.Equal(t, i, got.Data[i].Index)
				assert.Equal(t, "embedding", got.Data[i].Object)
				assert.Equal(t, upstreamtest.Vector(in, npmDims), got.Data[i].Embedding, "vector of %q", in)
			}
			require.NotNil(t, got.Usage, "usage")
			require.NotNil(t, got.Usage.PromptTokens, "usage.prompt_tokens")
			assert.Positive(t, *got.Usage.PromptTokens)

			reqs := up.Requests()[before:]
			require.Len(t, reqs, 1, "one upstream call")
			assert.Equal(t, "Bearer sk-x", reqs[0].Header.Get("Authorization"))
		})
	}
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	OwnedBy string `json:"owned_by"`
}

func TestNPMModelsList(t *testing.T) {
	sb, _, key := npmGateway(t)
	want := sb.ModelIDs(t)
	require.NotEmpty(t, want)

	var models []modelEntry
	sb.NPMClient(key).Op(t, "models.mjs", map[string]any{"op": "list"}).Decode(t, &models)
	var ids []string
	for _, m := range models {
		ids = append(ids, m.ID)
		assert.Equal(t, "model", m.Object, m.ID)
		assert.NotEmpty(t, m.OwnedBy, m.ID)
	}
	assert.ElementsMatch(t, want, ids)
	assert.Contains(t, ids, "openai/text-embedding-3-small")
	for _, id := range ids {
		assert.Regexp(t, `^openai/`, id)
	}
}

func TestNPMErrors(t *testing.T) {
	sb, up, key := npmGateway(t)
	embed := map[string]any{"model": "openai/text-embedding-3-small", "input": "x"}

	// A model no connection lists and no known provider prefix names. (A
	// known prefix, as in "openai/anything", is forwarded to the provider,
	// which judges the model itself.)
	t.Run("unknown model", func(t *testing.T) {
		before := up.Count(upstreamtest.PathEmbeddings)
		rs := sb.NPMClient(key).Ops(t, "embeddings.mjs",
			map[string]any{"model": "no-such-model", "input": "x"},
			map[string]any{"model": "acme/no-such-model", "input": "x"},
		)
		for i, r := range rs {
			require.NotNil(t, r.Error, "call %d: result %s", i, r.Result)
			assert.Equal(t, "BadRequestError", r.Error.Class, "call %d", i)
			assert.Equal(t, http.StatusBadRequest, r.Error.Status, "call %d", i)
			assert.Equal(t, "model_not_found", r.Error.Code, "call %d", i)
			assert.Equal(t, "invalid_request_error", r.Error.Type, "call %d", i)
			assert.Equal(t, "model", r.Error.Param, "call %d", i)
		}
		assert.Equal(t, before, up.Count(upstreamtest.PathEmbeddings), "nothing reaches the upstream")
	})

	t.Run("missing key when required", func(t *testing.T) {
		settings := sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": true})
		require.Equal(t, http.StatusOK, settings.Status, "%s", settings.Body)
		t.Cleanup(func() { sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": false}) })

		rs := sb.NPMClient("").Ops(t, "embeddings.mjs", embed)
		rs = append(rs, sb.NPMClient("").Op(t, "models.mjs", map[string]any{"op": "list"}))
		for i, r := range rs {
			require.NotNil(t, r.Error, "call %d: result %s", i, r.Result)
			assert.Equal(t, "AuthenticationError", r.Error.Class, "call %d", i)
			assert.Equal(t, http.StatusUnauthorized, r.Error.Status, "call %d", i)
			assert.Equal(t, "missing_api_key", r.Error.Code, "call %d", i)
			assert.Equal(t, "authentication_error", r.Error.Type, "call %d", i)
		}
		// The same calls with the key go through.
		var got embeddingsResult
		sb.NPMClient(key).Op(t, "embeddings.mjs", embed).Decode(t, &got)
		require.Len(t, got.Data, 1)
	})

	t.Run("upstream rate limit", func(t *testing.T) {
		up.SetDefault(upstreamtest.PathEmbeddings, upstreamtest.RateLimited("7"))
		t.Cleanup(func() { up.SetDefault(upstreamtest.PathEmbeddings, upstreamtest.OK()) })
		before := up.Count(upstreamtest.PathEmbeddings)

		r := sb.NPMClient(key).Op(t, "embeddings.mjs", embed)
		require.NotNil(t, r.Error, "result %s", r.Result)
		assert.Equal(t, "RateLimitError", r.Error.Class)
		assert.Equal(t, http.StatusTooManyRequests, r.Error.Status)
		assert.Equal(t, "rate_limit_error", r.Error.Type)
		assert.Equal(t, "rate_limit_exceeded", r.Error.Code)
		assert.NotEmpty(t, r.Error.Message)
		assert.NotEmpty(t, r.Error.RequestID, "x-request-id")
		retry, err := strconv.Atoi(r.Error.Headers["retry-after"])
		require.NoError(t, err, "retry-after %q", r.Error.Headers["retry-after"])
		assert.True(t, retry >= 1 && retry <= 7, "retry-after %d within the upstream's 7 s", retry)
		assert.Equal(t, 1, up.Count(upstreamtest.PathEmbeddings)-before, "the SDK does not retry (maxRetries: 0)")
	})
}
