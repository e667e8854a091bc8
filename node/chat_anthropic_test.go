package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// An Anthropic-compatible upstream, spoken to in its own format, answers
// OpenAI clients: whole answers, streams and tool calls.
func TestChatTranslatedToAnthropic(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	client := sdk(t, sb)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: "claude/claude-sonnet-4-6",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("be brief"),
			openai.UserMessage("hello claude"),
		},
	}

	resp, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "echo: hello claude", resp.Choices[0].Message.Content)
	assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
	assert.Positive(t, resp.Usage.PromptTokens)

	req := up.Requests()[0]
	assert.Equal(t, "/v1/messages", req.Path)
	assert.Equal(t, "sk-ant", req.Header.Get("x-api-key"))
	assert.NotEmpty(t, req.Header.Get("anthropic-version"))
	var sent map[string]any
	require.NoError(t, json.Unmarshal(req.Body, &sent))
	assert.Equal(t, "claude-sonnet-4-6", sent["model"])
	assert.Contains(t, string(req.Body), "be brief", "the system message became Anthropic's system")
	assert.NotNil(t, sent["max_tokens"], "Anthropic needs max_tokens")

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "echo: hello claude", acc.Choices[0].Message.Content)

	params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
	stream = client.Chat.Completions.NewStreaming(ctx, params)
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "get_weather", acc.Choices[0].Message.ToolCalls[0].Function.Name)
	var args map[string]any
	require.NoError(t, json.Unmarshal([]byte(acc.Choices[0].Message.ToolCalls[0].Function.Arguments), &args))
	assert.Equal(t, "hello claude", args["city"])
	assert.Equal(t, "tool_calls", string(acc.Choices[0].FinishReason))

	// An Anthropic error comes back in the OpenAI shape.
	up.Enqueue("/v1/messages", upstreamtest.AnthropicError(400, "invalid_request_error", "prompt is too long"))
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude/claude-sonnet-4-6",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "prompt is too long")
	assert.Equal(t, "context_length_exceeded", apiErr.Code, "OpenAI's code for a request past the context window")
}

// The terse-output option: injected once, in the target's shape, unless the
// request opts out or the connection overrides it.
func TestCaveman(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	oa := upstreamtest.New(t)
	an := upstreamtest.New(t)
	oaID := sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": oa.URL()}})
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-c", "name": "c", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": an.URL(), "prefix": "claude"}})
	body := func(model string) map[string]any {
		return map[string]any{"model": model, "messages": []map[string]any{
			{"role": "system", "content": "You are helpful."},
			{"role": "user", "content": "hi"},
		}}
	}
	systemOf := func(t *testing.T, up *upstreamtest.Server) string {
		reqs := up.Requests()
		var sent map[string]any
		require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &sent))
		if s, ok := sent["system"]; ok {
			b, _ := json.Marshal(s)
			return string(b)
		}
		msgs := sent["messages"].([]any)
		first := msgs[0].(map[string]any)
		b, _ := json.Marshal(first["content"])
		return first["role"].(string) + ":" + string(b)
	}

	require.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathChat, body("openai/gpt-4o-mini")).Status)
	plain := systemOf(t, oa)
	assert.Equal(t, `system:"You are helpful."`, plain, "off by default")

	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"cavemanEnabled": true, "cavemanLevel": "ultra"}).Status)
	require.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathChat, body("openai/gpt-4o-mini")).Status)
	terse := systemOf(t, oa)
	assert.True(t, len(terse) > len(plain) && terse[:len(plain)-1] == plain[:len(plain)-1], "appended to the first system message: %s", terse)
	reqs := oa.Requests()
	var sent map[string]any
	require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &sent))
	assert.Len(t, sent["messages"], 2, "no extra message when a system message exists")

	require.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathChat, body("openai/gpt-4o-mini"), "x-switchboard-token-saver", "off").Status)
	assert.Equal(t, plain, systemOf(t, oa), "the opt-out header")
	require.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathChat, body("openai/gpt-4o-mini"), "x-9router-token-saver", "off").Status)
	assert.Equal(t, plain, systemOf(t, oa), "the source's opt-out header too")

	require.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathChat, body("claude/claude-sonnet-4-6")).Status)
	asys := systemOf(t, an)
	assert.Contains(t, asys, "You are helpful.")
	assert.Greater(t, len(asys), len(`"You are helpful."`), "Anthropic's system carries the prompt: %s", asys)

	r := sb.Admin(t, http.MethodPatch, "/api/providers/"+oaID, map[string]any{"providerSpecificData": map[string]any{"caveman": map[string]any{"enabled": false}}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathChat, body("openai/gpt-4o-mini")).Status)
	assert.Equal(t, plain, systemOf(t, oa), "the connection's override wins")

	bad := sb.Admin(t, http.MethodPatch, "/api/providers/"+oaID, map[string]any{"providerSpecificData": map[string]any{"caveman": map[string]any{"level": "loud"}}})
	assert.Equal(t, http.StatusBadRequest, bad.Status)

	// An empty override removes it: the connection follows the machine
	// again, and its views say it overrides nothing.
	r = sb.Admin(t, http.MethodPatch, "/api/providers/"+oaID, map[string]any{"providerSpecificData": map[string]any{"caveman": map[string]any{}}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.NotContains(t, string(r.Body), `"caveman":{`, "no override left in the answer: %s", r.Body)
	require.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathChat, body("openai/gpt-4o-mini")).Status)
	assert.Equal(t, terse, systemOf(t, oa), "the machine's setting again")
}
