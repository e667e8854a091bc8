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

// Claude Code always sends max_tokens. Translated for OpenAI it goes as
// max_completion_tokens, which gpt-5 and the o-series take (they answer 400
// to max_tokens, as the fake does); an OpenAI-compatible server, which may
// know only max_tokens, still gets max_tokens.
func TestMessagesOutputCapFitsTheUpstream(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	openaiUp := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-openai"))
	compatible := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-compat"))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-openai",
		"providerSpecificData": map[string]any{"baseUrl": openaiUp.URL()}})
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "local", "apiKey": "sk-compat",
		"providerSpecificData": map[string]any{"baseUrl": compatible.URL(), "prefix": "local", "enabledModels": []string{"llama-3.3"}}})
	key := gatewayKey(t, sb)

	sent := func(t *testing.T, up *upstreamtest.Server) map[string]any {
		t.Helper()
		reqs := up.Requests()
		require.NotEmpty(t, reqs)
		var body map[string]any
		require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &body))
		return body
	}
	for _, stream := range []bool{false, true} {
		r, raw, events := postMessages(t, sb, key, messagesBody("openai/gpt-5", "cap me", stream))
		require.Equal(t, http.StatusOK, r.StatusCode, "stream %v: %s", stream, raw)
		if stream {
			require.NotEmpty(t, events)
			assert.Equal(t, "message_stop", events[len(events)-1].name)
		}
		body := sent(t, openaiUp)
		assert.EqualValues(t, 256, body["max_completion_tokens"], "stream %v", stream)
		assert.NotContains(t, body, "max_tokens", "stream %v", stream)

		r, raw, _ = postMessages(t, sb, key, messagesBody("local/llama-3.3", "cap me", stream))
		require.Equal(t, http.StatusOK, r.StatusCode, "stream %v: %s", stream, raw)
		body = sent(t, compatible)
		assert.EqualValues(t, 256, body["max_tokens"], "stream %v", stream)
		assert.NotContains(t, body, "max_completion_tokens", "stream %v", stream)
	}
}
