package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// A connection's enabled models are the models it serves: a model none of
// the provider's active connections enables is refused as not found, on
// every route that resolves it, with a message that names the provider and
// its enabled models rather than a want of credentials, which stays the
// answer of a provider without an active connection.
func TestModelNotEnabledOnAnyConnectionIsNotFound(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	id := sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "work", "apiKey": "sk-work",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "enabledModels": []string{"gpt-4o-mini", "text-embedding-3-small"}}})

	notEnabled := func(r nodetest.Response, param string) {
		t.Helper()
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		e, _ := r.JSON["error"].(map[string]any)
		assert.Equal(t, "model_not_found", e["code"], "%s", r.Body)
		assert.Equal(t, "invalid_request_error", e["type"])
		assert.Equal(t, param, e["param"])
		msg, _ := e["message"].(string)
		assert.Contains(t, msg, "enabled models")
		assert.Contains(t, msg, "'openai'")
		assert.NotContains(t, msg, "credentials")
		assert.NotContains(t, msg, "sk-work")
	}
	chat := chatAsk(t, sb, "openai/gpt-4o", "hello", false)
	notEnabled(chat.Response, "model")
	assert.Contains(t, chat.JSON["error"].(map[string]any)["message"], "'openai/gpt-4o'")
	notEnabled(sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "openai/text-embedding-3-large", "input": "x"}), "model")
	notEnabled(sb.Do(t, http.MethodPost, pathSpeech, map[string]any{"model": "openai/tts-1", "input": "hi", "voice": "alloy"}), "model")
	notEnabled(sb.Do(t, http.MethodGet, "/v1/audio/voices?provider=openai", nil), "provider")
	assert.Empty(t, up.Requests(), "no upstream was asked")

	// The enabled models are served.
	requireAnswer(t, chatAsk(t, sb, "openai/gpt-4o-mini", "hello", false), "hello")
	e := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "openai/text-embedding-3-small", "input": "x"})
	assert.Equal(t, http.StatusOK, e.Status, "%s", e.Body)

	// Without an active connection, the provider has no credentials.
	p := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"isActive": false})
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	require.Eventually(t, func() bool {
		return errorCode(chatAsk(t, sb, "openai/gpt-4o-mini", "hello", false).Response) == "no_credentials"
	}, 10*time.Second, 20*time.Millisecond)
	r := chatAsk(t, sb, "openai/gpt-4o", "hello", false)
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	assert.Equal(t, "no_credentials", errorCode(r.Response), "%s", r.Body)
}
