package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

type sdkMessage struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type  string         `json:"type"`
		Text  string         `json:"text"`
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// The official @anthropic-ai/sdk against /v1/messages, on both upstream
// shapes: create, stream (read with the SDK's own accumulator), tools,
// count_tokens, and a broken stream raised as an error.
func TestNPMAnthropicSDK(t *testing.T) {
	client, _, oai := sdkBothShapes(t)

	for _, model := range []string{"claude/claude-sonnet-4-6", chatModel} {
		t.Run(model, func(t *testing.T) {
			params := messagesBody(model, "hello sdk", false)
			delete(params, "stream")
			withTools := messagesBody(model, "Paris", false)
			delete(withTools, "stream")
			withTools["tools"] = []any{weatherToolAnthropic}
			res := client.Ops(t, "anthropic.mjs",
				map[string]any{"op": "create", "params": params},
				map[string]any{"op": "stream", "params": params},
				map[string]any{"op": "stream", "params": withTools},
				map[string]any{"op": "countTokens", "params": map[string]any{"model": model, "messages": params["messages"]}},
			)
			var msg sdkMessage
			res[0].Decode(t, &msg)
			assert.Equal(t, "message", msg.Type)
			require.NotEmpty(t, msg.Content)
			assert.Equal(t, "echo: hello sdk", msg.Content[0].Text)
			assert.Equal(t, "end_turn", msg.StopReason)
			assert.Positive(t, msg.Usage.InputTokens)

			var streamed struct {
				Events  []string   `json:"events"`
				Message sdkMessage `json:"message"`
			}
			res[1].Decode(t, &streamed)
			assert.Equal(t, "message_start", streamed.Events[0])
			assert.Equal(t, "message_stop", streamed.Events[len(streamed.Events)-1])
			require.NotEmpty(t, streamed.Message.Content)
			assert.Equal(t, "echo: hello sdk", streamed.Message.Content[0].Text)
			assert.Positive(t, streamed.Message.Usage.OutputTokens)

			res[2].Decode(t, &streamed)
			assert.Equal(t, "tool_use", streamed.Message.StopReason)
			var tool *struct {
				Type  string         `json:"type"`
				Text  string         `json:"text"`
				Name  string         `json:"name"`
				Input map[string]any `json:"input"`
			}
			for i := range streamed.Message.Content {
				if streamed.Message.Content[i].Type == "tool_use" {
					tool = &streamed.Message.Content[i]
				}
			}
			require.NotNil(t, tool, "a tool_use block")
			assert.Equal(t, "get_weather", tool.Name)
			assert.Equal(t, "Paris", tool.Input["city"])

			var count struct {
				InputTokens int `json:"input_tokens"`
			}
			res[3].Decode(t, &count)
			assert.Positive(t, count.InputTokens)
		})
	}

	t.Run("errors", func(t *testing.T) {
		oai.Enqueue(pathChat, upstreamtest.CutAfter(3))
		params := messagesBody(chatModel, "a long answer please", false)
		delete(params, "stream")
		res := client.Ops(t, "anthropic.mjs",
			map[string]any{"op": "stream", "params": params},
			map[string]any{"op": "create", "params": map[string]any{"model": chatModel, "messages": params["messages"]}},
		)
		require.NotNil(t, res[0].Error, "the SDK raises a stream broken after its first event")
		assert.Contains(t, res[0].Error.Message, "api_error")
		assert.Contains(t, res[0].Error.Message, "upstream stream broke off")
		require.NotNil(t, res[1].Error)
		assert.Equal(t, http.StatusBadRequest, res[1].Error.Status)
		assert.Equal(t, "invalid_request_error", res[1].Error.Type)
	})
}
