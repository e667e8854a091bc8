package node_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The official openai npm client's responses API: whole, streamed with its
// own reader, function calls, and a broken stream's response.failed.
func TestNPMResponses(t *testing.T) {
	nodetest.NPM(t)
	p := newPair(t)
	client := p.sb.NPMClient(gatewayKey(t, p.sb))
	tool := map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}
	p.primary.Enqueue(pathResponses, upstreamtest.OK(), upstreamtest.OK(), upstreamtest.OK(), upstreamtest.CutAfter(4))
	res := client.Ops(t, "responses.mjs",
		map[string]any{"model": chatModel, "input": "hello npm", "instructions": "be brief"},
		map[string]any{"model": chatModel, "input": "hello npm", "stream": true},
		map[string]any{"model": chatModel, "input": "Paris", "tools": []any{tool}, "stream": true},
		map[string]any{"model": chatModel, "input": "a long answer please", "stream": true},
	)
	var whole struct {
		OutputText string `json:"output_text"`
		Status     string `json:"status"`
	}
	res[0].Decode(t, &whole)
	assert.Equal(t, "echo: hello npm", whole.OutputText, "the SDK's output_text helper reads our output")
	assert.Equal(t, "completed", whole.Status)

	type streamed struct {
		Types    []string `json:"types"`
		Text     string   `json:"text"`
		Response struct {
			Status string            `json:"status"`
			Output []json.RawMessage `json:"output"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"response"`
	}
	var s streamed
	res[1].Decode(t, &s)
	assert.Equal(t, "echo: hello npm", s.Text)
	assert.Equal(t, "response.completed", s.Types[len(s.Types)-1])

	res[2].Decode(t, &s)
	require.NotEmpty(t, s.Response.Output)
	var call struct {
		Type, Name, Arguments string
	}
	require.NoError(t, json.Unmarshal(s.Response.Output[0], &call))
	assert.Equal(t, "function_call", call.Type)
	assert.Equal(t, "get_weather", call.Name)
	assert.JSONEq(t, `{"city":"Paris"}`, call.Arguments)

	s = streamed{}
	res[3].Decode(t, &s)
	assert.Equal(t, "response.failed", s.Types[len(s.Types)-1], "never a clean end")
	assert.Equal(t, "failed", s.Response.Status)
	require.NotNil(t, s.Response.Error)
	assert.NotEmpty(t, s.Response.Error.Message)
}
