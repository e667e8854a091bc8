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

// A codex connection's backend speaks only Responses: Chat Completions and
// Messages requests routed to it reach {base}/responses in that shape, with
// the headers the provider table gives it, and come back in the client's
// dialect, whole and streamed, with tool calls.
func TestCodexConnectionSpeaksResponses(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("chatgpt-token"))
	created := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "codex", "name": "cx", "apiKey": "chatgpt-token",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	client := sdk(t, sb)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello codex")}}

	resp, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "echo: hello codex", resp.Choices[0].Message.Content)
	assert.Positive(t, resp.Usage.TotalTokens)
	req := up.Requests()[0]
	assert.Equal(t, pathResponses, req.Path)
	assert.Equal(t, "Bearer chatgpt-token", req.Header.Get("Authorization"))
	assert.Equal(t, "responses=experimental", req.Header.Get("OpenAI-Beta"))
	assert.Equal(t, "codex_cli_rs", req.Header.Get("Originator"))
	var sent map[string]any
	require.NoError(t, json.Unmarshal(req.Body, &sent))
	assert.Equal(t, "gpt-5-codex", sent["model"])
	assert.Equal(t, "be brief", sent["instructions"])
	assert.Equal(t, false, sent["store"])

	params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Paris")}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "get_weather", acc.Choices[0].Message.ToolCalls[0].Function.Name)
	assert.JSONEq(t, `{"city":"Paris"}`, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "tool_calls", string(acc.Choices[0].FinishReason))

	key := gatewayKey(t, sb)
	r, _, events := postMessages(t, sb, key, messagesBody("codex/gpt-5-codex", "hello claude code", true))
	require.Equal(t, http.StatusOK, r.StatusCode)
	assert.Equal(t, "echo: hello claude code", accumulate(t, events).text)

	// A break after the first event: the client's own in-band error.
	up.Enqueue(pathResponses, upstreamtest.CutAfter(4))
	stream = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a long answer please")}})
	n := 0
	for stream.Next() {
		n++
	}
	require.Error(t, stream.Err(), "never a clean end")
	assert.Contains(t, stream.Err().Error(), "stream_interrupted")
	assert.Positive(t, n, "the break came after the first event")
}
