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

// Caveman's prompt goes into the upstream's own shape whatever the client's
// dialect: Anthropic's system for Messages passed through, the chat system
// message for Messages translated, instructions for Responses passed
// through.
func TestCavemanInEveryDialect(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	an := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": an.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	oa := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k", "providerSpecificData": map[string]any{"baseUrl": oa.URL()}})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"cavemanEnabled": true, "cavemanLevel": "ultra"}).Status)
	key := gatewayKey(t, sb)
	last := func(up *upstreamtest.Server) map[string]any {
		reqs := up.Requests()
		var v map[string]any
		require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &v))
		return v
	}

	r, raw, _ := postMessages(t, sb, key, messagesBody("claude/claude-sonnet-4-6", "hi", false))
	require.Equal(t, http.StatusOK, r.StatusCode, string(raw))
	sys, _ := json.Marshal(last(an)["system"])
	assert.Contains(t, string(sys), "be brief")
	assert.Greater(t, len(sys), len(`[{"text":"be brief","type":"text"}]`), "the prompt joined Anthropic's system: %s", sys)

	r, raw, _ = postMessages(t, sb, key, messagesBody(chatModel, "hi", false))
	require.Equal(t, http.StatusOK, r.StatusCode, string(raw))
	first := last(oa)["messages"].([]any)[0].(map[string]any)
	assert.Equal(t, "system", first["role"])
	assert.Greater(t, len(first["content"].(string)), len("be brief"), "the prompt joined the chat system message")

	res := sb.Do(t, http.MethodPost, pathResponses, map[string]any{"model": chatModel, "input": "hi", "instructions": "be brief"}, "Authorization", "Bearer "+key)
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	ins := last(oa)["instructions"].(string)
	assert.Contains(t, ins, "be brief")
	assert.Greater(t, len(ins), len("be brief"), "the prompt joined Responses' instructions")

	res = sb.Do(t, http.MethodPost, pathResponses, map[string]any{"model": chatModel, "input": "hi", "instructions": "be brief"},
		"Authorization", "Bearer "+key, "x-switchboard-token-saver", "off")
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, "be brief", last(oa)["instructions"], "the opt-out header")
}
