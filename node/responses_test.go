package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

const pathResponses = "/v1/responses"

var weatherToolResponses = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name: "get_weather", Description: openai.String("weather of a city"),
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
}}

// streamResponse reads a Responses stream with openai-go and returns the
// event types and the final response.
func streamResponse(t *testing.T, client openai.Client, params responses.ResponseNewParams) ([]string, *responses.Response, error) {
	t.Helper()
	stream := client.Responses.NewStreaming(context.Background(), params)
	var types []string
	var final *responses.Response
	text := ""
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.AsResponseOutputTextDelta().Delta
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			final = &r
		case "response.failed":
			f := ev.AsResponseFailed().Response
			assert.Equal(t, responses.ResponseStatusFailed, f.Status)
			assert.NotEmpty(t, f.ID, "the failure names the response the stream started")
			assert.NotEmpty(t, f.Error.Message)
		}
	}
	if final != nil {
		assert.Equal(t, final.OutputText(), text, "the deltas add up to the final text")
	}
	return types, final, stream.Err()
}

// /v1/responses on each upstream shape, with openai-go's Responses API:
// natively on a Responses upstream (openai), translated for a chat-only one
// (an openai-compatible connection) and for an Anthropic-shaped one.
func TestResponses(t *testing.T) {
	for _, tc := range []struct {
		name, provider, model, upstreamPath string
		data                                map[string]any
	}{
		{"native", "openai", chatModel, pathResponses, nil},
		{"chat upstream", "openai-compatible-local", "local/gpt-4o-mini", pathChat, map[string]any{"prefix": "local"}},
		{"anthropic upstream", "anthropic-compatible-claude", "claude/claude-sonnet-4-6", "/v1/messages",
			map[string]any{"prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"))
			data := map[string]any{"baseUrl": up.URL()}
			for k, v := range tc.data {
				data[k] = v
			}
			sb.CreateConnection(t, map[string]any{"provider": tc.provider, "name": "c", "apiKey": "sk-up", "providerSpecificData": data})
			client := sdk(t, sb)
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model:        tc.model,
				Instructions: openai.String("be brief"),
				Temperature:  openai.Float(0.5),
				Metadata:     map[string]string{"run": "r1"},
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello responses")},
			}

			resp, err := client.Responses.New(ctx, params)
			require.NoError(t, err)
			assert.Equal(t, "echo: hello responses", resp.OutputText())
			assert.Equal(t, responses.ResponseStatusCompleted, resp.Status)
			// The response repeats its request, as OpenAI's do.
			echoes := func(r *responses.Response) {
				t.Helper()
				assert.Equal(t, "be brief", r.Instructions.OfString, "instructions")
				assert.Equal(t, 0.5, r.Temperature, "temperature")
				assert.Equal(t, "r1", r.Metadata["run"], "metadata")
			}
			echoes(resp)
			assert.Positive(t, resp.Usage.InputTokens)
			assert.Positive(t, resp.Usage.OutputTokens)
			req := up.Requests()[0]
			assert.Equal(t, tc.upstreamPath, req.Path)
			assert.Contains(t, string(req.Body), "be brief", "instructions reached the upstream")

			types, final, err := streamResponse(t, client, params)
			require.NoError(t, err)
			require.NotNil(t, final, "the stream ends with response.completed")
			assert.Equal(t, "response.created", types[0])
			assert.Equal(t, "response.completed", types[len(types)-1])
			assert.Contains(t, types, "response.output_text.delta")
			assert.Equal(t, "echo: hello responses", final.OutputText())
			echoes(final)
			assert.Positive(t, final.Usage.OutputTokens)

			// A function call, then its output sent back as an item.
			params.Tools = []responses.ToolUnionParam{weatherToolResponses}
			params.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("Paris")}
			types, final, err = streamResponse(t, client, params)
			require.NoError(t, err)
			require.NotNil(t, final)
			assert.Contains(t, types, "response.function_call_arguments.delta")
			var call responses.ResponseFunctionToolCall
			for _, item := range final.Output {
				if item.Type == "function_call" {
					call = item.AsFunctionCall()
				}
			}
			require.Equal(t, "get_weather", call.Name)
			var args map[string]any
			require.NoError(t, json.Unmarshal([]byte(call.Arguments), &args))
			assert.Equal(t, "Paris", args["city"])

			round := sb.Do(t, http.MethodPost, pathResponses, map[string]any{"model": tc.model, "tools": []any{map[string]any{
				"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}},
				"input": []any{
					map[string]any{"role": "user", "content": "Paris"},
					map[string]any{"type": "function_call", "call_id": call.CallID, "name": "get_weather", "arguments": call.Arguments},
					map[string]any{"type": "function_call_output", "call_id": call.CallID, "output": "sunny"},
				}}, "Authorization", "Bearer "+sdkKey(t, sb))
			require.Equal(t, http.StatusOK, round.Status, string(round.Body))
			var r responses.Response
			require.NoError(t, json.Unmarshal(round.Body, &r))
			assert.Equal(t, "echo: sunny", r.OutputText(), "the function's output reached the upstream")
		})
	}
}

func sdkKey(t *testing.T, sb *nodetest.Instance) string { return gatewayKey(t, sb) }

// Errors on /v1/responses are OpenAI's; a stream that breaks after its
// first event ends with response.failed, which openai-go raises; before it,
// the fallback answers.
func TestResponsesErrors(t *testing.T) {
	p := newPair(t)
	client := sdk(t, p.sb)
	ctx := context.Background()
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: chatModel})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Equal(t, "input", apiErr.Param)

	params := responses.ResponseNewParams{Model: chatModel, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("a long answer please")}}
	p.primary.Enqueue(pathResponses, upstreamtest.Overloaded())
	_, final, err := streamResponse(t, client, params)
	require.NoError(t, err)
	assert.Equal(t, "echo: a long answer please", final.OutputText(), "the fallback answered")

	for _, tc := range []struct {
		name  string
		fault upstreamtest.Fault
	}{
		{"8 stream cut after some events", upstreamtest.CutAfter(4)},
		{"10 malformed event mid-stream", upstreamtest.MalformedChunkAfter(4)},
		{"11 stream ends without completion", upstreamtest.NoFinish()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			p.primary.Enqueue(pathResponses, tc.fault)
			types, final, err := streamResponse(t, sdk(t, p.sb), params)
			assert.Nil(t, final, "never response.completed")
			require.NotEmpty(t, types)
			assert.Equal(t, "response.failed", types[len(types)-1], "the dialect's own in-band error")
			require.NoError(t, err, "openai-go hands response.failed to the caller as an event")
			assert.Zero(t, p.fallback.Count(pathResponses), "no fallback once the stream started")
		})
	}
}

// store keeps an answer for GET /v1/responses/{id} and previous_response_id
// (the conversation goes upstream whole, whatever the upstream); store:
// false keeps nothing; another machine's key sees nothing.
func TestResponsesStored(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "c", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	client := sdk(t, sb)
	ctx := context.Background()
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "local/m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("my name is Ada")}})
	require.NoError(t, err)

	got, err := client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	assert.Equal(t, first.ID, got.ID)
	assert.Equal(t, "echo: my name is Ada", got.OutputText())

	// Streamed, continuing the first.
	types, second, err := streamResponse(t, client, responses.ResponseNewParams{Model: "local/m",
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("what is my name?")}})
	require.NoError(t, err)
	require.NotNil(t, second, "%v", types)
	last := up.Requests()[len(up.Requests())-1]
	assert.Contains(t, string(last.Body), "my name is Ada", "the stored turn went upstream")
	assert.Contains(t, string(last.Body), "echo: my name is Ada", "with its answer")
	assert.NotContains(t, string(last.Body), "previous_response_id")

	// A third turn on the second carries the whole conversation.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "local/m",
		PreviousResponseID: openai.String(second.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("third")}})
	require.NoError(t, err)
	last = up.Requests()[len(up.Requests())-1]
	for _, s := range []string{"my name is Ada", "what is my name?", "third"} {
		assert.Contains(t, string(last.Body), s)
	}

	notStored, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "local/m", Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("forget me")}})
	require.NoError(t, err)
	_, err = client.Responses.Get(ctx, notStored.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode)

	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "local/m", PreviousResponseID: openai.String(notStored.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Equal(t, "previous_response_id", apiErr.Param)

	// Another machine's key does not see the first machine's answers.
	m := sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "other"})
	require.Equal(t, http.StatusCreated, m.Status, "%s", m.Body)
	mid := m.JSON["machine"].(map[string]any)["id"].(string)
	k := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "o"}, "X-Switchboard-Machine", mid)
	require.Equal(t, http.StatusCreated, k.Status)
	r := sb.Do(t, http.MethodGet, pathResponses+"/"+first.ID, nil, "Authorization", "Bearer "+k.JSON["key"].(string))
	assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = sb.Do(t, http.MethodGet, pathResponses+"/"+first.ID, nil, "Authorization", "Bearer "+gatewayKey(t, sb))
	assert.Equal(t, http.StatusOK, r.Status, "the owner's key does")
}

// A response continuing another names it in previous_response_id, as
// OpenAI's do, whatever the upstream: the gateway keeps the conversation
// and sends it whole, so a Responses upstream never sees the id.
func TestResponsesNameTheResponseTheyContinue(t *testing.T) {
	for _, tc := range []struct{ name, provider, model string }{
		{"native", "openai", chatModel},
		{"chat upstream", "openai-compatible-local", "local/gpt-4o-mini"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"))
			sb.CreateConnection(t, map[string]any{"provider": tc.provider, "name": "c", "apiKey": "sk-up",
				"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
			client := sdk(t, sb)
			ctx := context.Background()
			first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: tc.model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("my name is Ada")}})
			require.NoError(t, err)
			assert.Empty(t, first.PreviousResponseID)

			next := responses.ResponseNewParams{Model: tc.model, PreviousResponseID: openai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("what is my name?")}}
			second, err := client.Responses.New(ctx, next)
			require.NoError(t, err)
			assert.Equal(t, first.ID, second.PreviousResponseID, "whole")
			got, err := client.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
			require.NoError(t, err)
			assert.Equal(t, first.ID, got.PreviousResponseID, "retrieved")

			stream := client.Responses.NewStreaming(ctx, next)
			named := map[string]string{}
			for stream.Next() {
				ev := stream.Current()
				if strings.HasPrefix(ev.Type, "response.") && ev.Response.ID != "" {
					named[ev.Type] = ev.Response.PreviousResponseID
				}
			}
			require.NoError(t, stream.Err())
			for _, typ := range []string{"response.created", "response.completed"} {
				assert.Equal(t, first.ID, named[typ], "streamed, %s", typ)
			}
		})
	}
}
