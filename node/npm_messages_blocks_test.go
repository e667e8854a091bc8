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

// sdkChatGateway starts an instance whose chatModel is served by a fake
// OpenAI upstream, and returns the Anthropic SDK's client for it with the
// upstream.
func sdkChatGateway(t *testing.T) (nodetest.NodeClient, *upstreamtest.Server) {
	t.Helper()
	nodetest.NPM(t)
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-oai"))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-oai",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	return sb.NPMClient(gatewayKey(t, sb)), up
}

// chatSent is the chat request an upstream got, its messages' content as
// text (a string, or its parts' text joined).
type chatSent struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
}

func lastChatSent(t *testing.T, up *upstreamtest.Server) chatSent {
	t.Helper()
	reqs := up.Requests()
	require.NotEmpty(t, reqs)
	var sent chatSent
	require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &sent))
	return sent
}

// Search results (Anthropic's search_result blocks, which a RAG tool
// answers with, or an app puts in its user turn) reach a chat model as
// text: their title, source and content, where the model reads them.
func TestNPMAnthropicSDKSearchResultsReachAChatModel(t *testing.T) {
	client, up := sdkChatGateway(t)
	result := map[string]any{"type": "search_result", "source": "https://docs.example.com/refunds", "title": "Refund policy",
		"content": []any{map[string]any{"type": "text", "text": "Refunds are accepted within 30 days."}}, "citations": map[string]any{"enabled": true}}
	params := map[string]any{"model": chatModel, "max_tokens": 100, "tools": []any{weatherToolAnthropic},
		"messages": []any{
			map[string]any{"role": "user", "content": "what is the refund window?"},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "tool_use", "id": "toolu_01S", "name": "get_weather", "input": map[string]any{"city": "refunds"}}}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "toolu_01S", "content": []any{result}}}},
		}}
	asked := map[string]any{"model": chatModel, "max_tokens": 100, "messages": []any{
		map[string]any{"role": "user", "content": []any{result, map[string]any{"type": "text", "text": "what is the refund window?"}}}}}

	res := client.Ops(t, "anthropic.mjs",
		map[string]any{"op": "create", "params": params},
		map[string]any{"op": "create", "params": asked},
	)

	var msg sdkMessage
	res[0].Decode(t, &msg)
	sent := up.Requests()[0]
	var got chatSent
	require.NoError(t, json.Unmarshal(sent.Body, &got))
	require.Len(t, got.Messages, 3, "%s", sent.Body)
	tool := got.Messages[2]
	assert.Equal(t, "tool", tool.Role)
	for _, want := range []string{"Refund policy", "https://docs.example.com/refunds", "Refunds are accepted within 30 days."} {
		assert.Contains(t, string(tool.Content), want, "the tool's result as the model reads it")
	}

	res[1].Decode(t, &msg)
	require.NotEmpty(t, msg.Content)
	user := lastChatSent(t, up).Messages[0]
	for _, want := range []string{"Refund policy", "https://docs.example.com/refunds", "Refunds are accepted within 30 days.", "what is the refund window?"} {
		assert.Contains(t, string(user.Content), want, "the user's turn as the model reads it")
	}
}

// A conversation a chat upstream served holds its tool call ids, which
// need not be made of the [a-zA-Z0-9_-] Anthropic takes (Kimi's are
// "functions.get_weather:0"). Moved to an Anthropic-shaped upstream (a
// model switched, a combo's fallback), it goes on: its calls and results
// go up under ids Anthropic takes, still paired.
func TestNPMAnthropicSDKChatToolIDsGoOnOnAnthropic(t *testing.T) {
	client, ant, oai := sdkBothShapes(t)
	oai.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, `{"id":"chatcmpl-k","object":"chat.completion","created":1,"model":"kimi","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},`+
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18}}`))

	first := map[string]any{"model": chatModel, "max_tokens": 100, "tools": []any{weatherToolAnthropic},
		"messages": []any{map[string]any{"role": "user", "content": "Paris"}}}
	var called struct {
		Content []map[string]any `json:"content"`
	}
	client.Op(t, "anthropic.mjs", map[string]any{"op": "create", "params": first}).Decode(t, &called)
	require.Len(t, called.Content, 1)
	id := called.Content[0]["id"]

	next := map[string]any{"model": "claude/claude-sonnet-4-6", "max_tokens": 100, "tools": []any{weatherToolAnthropic},
		"messages": []any{
			map[string]any{"role": "user", "content": "Paris"},
			map[string]any{"role": "assistant", "content": called.Content},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "sunny"}}},
		}}
	res := client.Ops(t, "anthropic.mjs",
		map[string]any{"op": "create", "params": next},
		map[string]any{"op": "stream", "params": next},
	)
	var msg sdkMessage
	res[0].Decode(t, &msg)
	assert.Equal(t, "echo: sunny", msg.Content[0].Text)
	var streamed struct {
		Message sdkMessage `json:"message"`
	}
	res[1].Decode(t, &streamed)
	assert.Equal(t, "echo: sunny", streamed.Message.Content[0].Text)

	var sent struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(ant.Requests()[0].Body, &sent))
	var use, result []map[string]any
	require.NoError(t, json.Unmarshal(sent.Messages[1].Content, &use))
	require.NoError(t, json.Unmarshal(sent.Messages[2].Content, &result))
	assert.Regexp(t, `^[a-zA-Z0-9_-]+$`, use[0]["id"])
	assert.Equal(t, use[0]["id"], result[0]["tool_use_id"], "the result still answers its call")
}
