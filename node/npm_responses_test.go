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

// responsesTranslated starts an instance serving "local/gpt-4o-mini" from a
// fake chat-only upstream and "claude/claude-sonnet-4-6" from a fake
// Anthropic one, and returns the npm client for it with each model's
// upstream and the path it is asked at.
func responsesTranslated(t *testing.T) (nodetest.NodeClient, []translatedUpstream) {
	t.Helper()
	nodetest.NPM(t)
	sb := nodetest.Serve(t, t.TempDir())
	chat := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "l", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": chat.URL(), "prefix": "local"}})
	ant := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": ant.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	return sb.NPMClient(gatewayKey(t, sb)), []translatedUpstream{
		{"chat upstream", "local/gpt-4o-mini", chat, pathChat},
		{"anthropic upstream", "claude/claude-sonnet-4-6", ant, upstreamtest.PathMessages},
	}
}

type translatedUpstream struct {
	name, model string
	up          *upstreamtest.Server
	path        string
}

// A json_schema text format without its name or schema is refused as the
// Responses API refuses it, naming text.format's member, before any
// upstream is asked; with both it goes through.
func TestNPMResponsesJSONSchemaFormatNeedsNameAndSchema(t *testing.T) {
	client, ups := responsesTranslated(t)
	schema := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}
	for _, u := range ups {
		t.Run(u.name, func(t *testing.T) {
			res := client.Ops(t, "responses.mjs",
				map[string]any{"model": u.model, "input": "x", "text": map[string]any{"format": map[string]any{"type": "json_schema", "schema": schema}}},
				map[string]any{"model": u.model, "input": "x", "text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "answer"}}},
				map[string]any{"model": u.model, "input": "x", "text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "answer", "schema": schema}}},
			)
			for i, param := range []string{"text.format.name", "text.format.schema"} {
				require.NotNil(t, res[i].Error, "call %d: result %s", i, res[i].Result)
				assert.Equal(t, "BadRequestError", res[i].Error.Class, "call %d", i)
				assert.Equal(t, http.StatusBadRequest, res[i].Error.Status, "call %d", i)
				assert.Equal(t, param, res[i].Error.Param, "call %d", i)
				assert.Equal(t, "invalid_request_error", res[i].Error.Type, "call %d", i)
			}
			assert.Nil(t, res[2].Error, "name and schema given")
			assert.Equal(t, 1, u.up.Count(u.path), "only the whole format reached the upstream")
		})
	}
}

// A translated response carries temperature and top_p, which the SDK's
// Response type requires (number or null): null when the request left
// them to the model, as sent otherwise, whole and streamed.
func TestNPMResponsesSamplingMembers(t *testing.T) {
	client, ups := responsesTranslated(t)
	for _, u := range ups {
		t.Run(u.name, func(t *testing.T) {
			res := client.Ops(t, "responses.mjs",
				map[string]any{"model": u.model, "input": "x"},
				map[string]any{"model": u.model, "input": "x", "stream": true},
				map[string]any{"model": u.model, "input": "x", "temperature": 0.5, "top_p": 0.9},
			)
			var whole, sampled map[string]json.RawMessage
			res[0].Decode(t, &whole)
			var streamed struct {
				Response map[string]json.RawMessage `json:"response"`
			}
			res[1].Decode(t, &streamed)
			res[2].Decode(t, &sampled)
			for _, k := range []string{"temperature", "top_p"} {
				assert.Equal(t, "null", string(whole[k]), "whole %s", k)
				assert.Equal(t, "null", string(streamed.Response[k]), "streamed %s", k)
			}
			assert.Equal(t, "0.5", string(sampled["temperature"]))
			assert.Equal(t, "0.9", string(sampled["top_p"]))
		})
	}
}
