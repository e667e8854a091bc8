package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// postJSON sends body to path with key and returns the status and body.
func postJSON(t *testing.T, sb *nodetest.Instance, key, path string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// Hosted tools (web_search and the like) have no counterpart in Chat
// Completions, and both routes treat them alike: translated to a chat
// upstream, a Messages or Responses request whose only tools are hosted is
// refused with a 400 in the route's own shape and nothing goes upstream;
// beside the client's own tools they are left out (Codex offers web_search
// with every turn); where the upstream speaks the dialect natively they
// pass through.
func TestHostedToolsRefusedWhenTranslated(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "l", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	key := gatewayKey(t, sb)

	status, raw := postJSON(t, sb, key, pathResponses, map[string]any{"model": "local/gpt-4o-mini", "input": "news?",
		"tools": []any{map[string]any{"type": "web_search"}}})
	assert.Equal(t, http.StatusBadRequest, status, "%s", raw)
	var oe struct {
		Error struct{ Message, Type, Param string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &oe), "%s", raw)
	assert.Equal(t, "invalid_request_error", oe.Error.Type)
	assert.Equal(t, "tools[0].type", oe.Error.Param)
	assert.Contains(t, oe.Error.Message, "web_search")

	status, raw = postJSON(t, sb, key, pathMessages, map[string]any{"model": "local/gpt-4o-mini", "max_tokens": 64,
		"messages": []any{map[string]any{"role": "user", "content": "news?"}},
		"tools":    []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}}})
	assert.Equal(t, http.StatusBadRequest, status, "%s", raw)
	var ae struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal(raw, &ae), "%s", raw)
	assert.Equal(t, "error", ae.Type)
	assert.Equal(t, "invalid_request_error", ae.Error.Type)
	assert.Contains(t, ae.Error.Message, "web_search")
	assert.Zero(t, up.Count(pathChat), "nothing went upstream")

	// Beside functions, on either route: left out, answered.
	fn := map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}
	status, raw = postJSON(t, sb, key, pathResponses, map[string]any{"model": "local/gpt-4o-mini", "input": "news?",
		"tools": []any{fn, map[string]any{"type": "web_search"}}})
	assert.Equal(t, http.StatusOK, status, "%s", raw)
	status, raw = postJSON(t, sb, key, pathMessages, map[string]any{"model": "local/gpt-4o-mini", "max_tokens": 64,
		"messages": []any{map[string]any{"role": "user", "content": "news?"}},
		"tools": []any{map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}},
			map[string]any{"type": "web_search_20250305", "name": "web_search"}}})
	assert.Equal(t, http.StatusOK, status, "%s", raw)
	require.Equal(t, 2, up.Count(pathChat))
	for _, r := range up.Requests() {
		assert.NotContains(t, string(r.Body), "web_search", "the hosted tool was left out")
	}

	// Native Responses: the hosted tool reaches the upstream as sent.
	status, raw = postJSON(t, sb, key, pathResponses, map[string]any{"model": chatModel, "input": "news?",
		"tools": []any{map[string]any{"type": "web_search"}}})
	assert.Equal(t, http.StatusOK, status, "%s", raw)
	reqs := up.Requests()
	require.NotEmpty(t, reqs)
	assert.Contains(t, string(reqs[len(reqs)-1].Body), `"web_search"`)
}

// Thinking blocks the gateway made from a non-Anthropic upstream's
// reasoning carry an empty signature; sent back by the client to an
// Anthropic upstream they are dropped (it would refuse a signature it did
// not make), while signed ones pass through untouched.
func TestUnsignedThinkingNotForwardedToAnthropic(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "a", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	key := gatewayKey(t, sb)
	body := func(signature string) map[string]any {
		return map[string]any{"model": "claude/claude-sonnet-4-6", "max_tokens": 64, "messages": []any{
			map[string]any{"role": "user", "content": "first"},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "thinking", "thinking": "let me think", "signature": signature},
				map[string]any{"type": "text", "text": "an answer"}}},
			map[string]any{"role": "user", "content": "second"},
		}}
	}
	sent := func() []map[string]any {
		reqs := up.Requests()
		require.NotEmpty(t, reqs)
		var b struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &b))
		require.Len(t, b.Messages, 3)
		var blocks []map[string]any
		require.NoError(t, json.Unmarshal(b.Messages[1].Content, &blocks))
		return blocks
	}

	status, raw := postJSON(t, sb, key, pathMessages, body(""))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	blocks := sent()
	require.Len(t, blocks, 1, "the unsigned thinking block was dropped")
	assert.Equal(t, "text", blocks[0]["type"])

	status, raw = postJSON(t, sb, key, pathMessages, body("EqQBCgIYAhIM1gbc"))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	blocks = sent()
	require.Len(t, blocks, 2, "a signed block passes through")
	assert.Equal(t, "EqQBCgIYAhIM1gbc", blocks[0]["signature"])
}
