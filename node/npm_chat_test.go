package node_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

type npmStream struct {
	Chunks    int    `json:"chunks"`
	Content   string `json:"content"`
	ToolCalls []struct {
		ID, Name, Arguments string
	} `json:"toolCalls"`
	FinishReason string          `json:"finishReason"`
	Usage        json.RawMessage `json:"usage"`
}

var npmTools = []map[string]any{{
	"type": "function",
	"function": map[string]any{
		"name": "get_weather",
		"parameters": map[string]any{
			"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"},
		},
	},
}}

// The official openai npm client parses every stream the gateway relays:
// text, tool-call streams with argument fragments, from an OpenAI upstream
// and translated from an Anthropic one; and raises a broken stream.
func TestNPMChat(t *testing.T) {
	sb, up, key := npmGateway(t)
	claude := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-c", "name": "c", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": claude.URL(), "prefix": "claude"}})
	client := sb.NPMClient(key)
	msgs := []map[string]any{{"role": "user", "content": "Lisbon"}}

	for _, model := range []string{"openai/gpt-4o-mini", "claude/claude-sonnet-4-6"} {
		t.Run(model, func(t *testing.T) {
			whole := client.Op(t, "chat.mjs", map[string]any{"model": model, "messages": msgs})
			require.Nil(t, whole.Error, "%+v", whole.Error)
			var c struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			whole.Decode(t, &c)
			assert.Equal(t, "echo: Lisbon", c.Choices[0].Message.Content)

			res := client.Op(t, "chat.mjs", map[string]any{"model": model, "messages": msgs, "stream": true,
				"stream_options": map[string]any{"include_usage": true}})
			require.Nil(t, res.Error, "%+v", res.Error)
			var s npmStream
			res.Decode(t, &s)
			assert.Equal(t, "echo: Lisbon", s.Content)
			assert.Equal(t, "stop", s.FinishReason)
			assert.NotEqual(t, "null", string(s.Usage), "usage asked for, usage given")

			res = client.Op(t, "chat.mjs", map[string]any{"model": model, "messages": msgs, "stream": true, "tools": npmTools})
			require.Nil(t, res.Error, "%+v", res.Error)
			s = npmStream{}
			res.Decode(t, &s)
			require.Len(t, s.ToolCalls, 1)
			assert.Equal(t, "get_weather", s.ToolCalls[0].Name)
			assert.NotEmpty(t, s.ToolCalls[0].ID)
			assert.JSONEq(t, `{"city":"Lisbon"}`, s.ToolCalls[0].Arguments)
			assert.Equal(t, "tool_calls", s.FinishReason)
		})
	}

	t.Run("a stream cut mid-way is raised", func(t *testing.T) {
		up.Enqueue(pathChat, upstreamtest.CutAfter(3))
		res := client.Op(t, "chat.mjs", map[string]any{"model": "openai/gpt-4o-mini", "messages": msgs, "stream": true})
		require.NotNil(t, res.Error, "the SDK must not see a clean end")
		assert.Contains(t, res.Error.Message, "broke off", "the in-band error event, raised by the SDK (%s)", res.Error.Class)
	})

	t.Run("errors before the stream are typed", func(t *testing.T) {
		res := client.Op(t, "chat.mjs", map[string]any{"model": "acme/x", "messages": msgs, "stream": true})
		require.NotNil(t, res.Error)
		assert.Equal(t, http.StatusBadRequest, res.Error.Status)
		assert.Equal(t, "model_not_found", res.Error.Code)
	})

	t.Run("a list past its bound is refused in OpenAI's code and words", func(t *testing.T) {
		res := client.Op(t, "chat.mjs", map[string]any{"model": "openai/gpt-4o-mini", "messages": msgs,
			"stop": []string{"a", "b", "c", "d", "e"}})
		require.NotNil(t, res.Error)
		assert.Equal(t, "BadRequestError", res.Error.Class)
		assert.Equal(t, "array_above_max_length", res.Error.Code)
		assert.Equal(t, "stop", res.Error.Param)
		assert.Contains(t, res.Error.Message, "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 instead.")
	})
}
