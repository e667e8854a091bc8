package node_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// chatModels are the models an upstream was asked for on its chat route,
// in order.
func chatModels(t *testing.T, up *upstreamtest.Server) []string {
	t.Helper()
	var out []string
	for _, r := range up.Requests() {
		if r.Path != upstreamtest.PathChatCompletions {
			continue
		}
		var body struct {
			Model string `json:"model"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &body))
		out = append(out, body.Model)
	}
	return out
}

// A machine whose only connection is OpenRouter is asked for a model as
// OpenRouter writes it, "openai/gpt-4o-mini": the request goes to
// OpenRouter with that id, whose catalog lists it, rather than being
// refused for want of an OpenAI connection. With an OpenAI connection too,
// the prefix names it and the request goes to OpenAI as "gpt-4o-mini"; an
// id nothing lists is refused as before. The model listing is the same.
func TestVendorModelIDGoesToTheConnectionListingIt(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	or := upstreamtest.New(t, upstreamtest.WithModels("openai/gpt-4o-mini", "acme/small"))
	sb.CreateConnection(t, map[string]any{"provider": "openrouter", "name": "openrouter", "apiKey": "sk-or",
		"priority": 1, "providerSpecificData": map[string]any{"baseUrl": or.URL()}})
	listed := sb.ModelIDs(t)
	require.Contains(t, listed, "openrouter/openai/gpt-4o-mini")
	require.NotContains(t, listed, "openai/gpt-4o-mini")

	for _, s := range chatModes {
		requireAnswer(t, chatAsk(t, sb, "openai/gpt-4o-mini", "hello", s.stream), "hello")
	}
	assert.Equal(t, []string{"openai/gpt-4o-mini", "openai/gpt-4o-mini"}, chatModels(t, or), "OpenRouter was asked for its own id")

	r := chatAsk(t, sb, "openai/gpt-9", "hello", false)
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	assert.Equal(t, "no_credentials", errorCode(r.Response), "%s", r.Body)
	assert.Equal(t, listed, sb.ModelIDs(t), "the listing is the same")

	oa := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "openai", "apiKey": "sk-oa",
		"priority": 2, "providerSpecificData": map[string]any{"baseUrl": oa.URL()}})
	requireAnswer(t, chatAsk(t, sb, "openai/gpt-4o-mini", "hello", false), "hello")
	assert.Equal(t, []string{"gpt-4o-mini"}, chatModels(t, oa), "the prefix names the OpenAI connection")
	assert.Len(t, chatModels(t, or), 2, "OpenRouter was not asked again")
}
