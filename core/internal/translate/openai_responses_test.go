package translate

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Chat Completions answers as /v1/responses clients see them.

// responseEvents feeds chunks to a ChunkToResponses and returns the events
// it sent, by name and decoded, and whether the answer was complete.
func responseEvents(t *testing.T, chunks ...string) ([]string, []map[string]any, bool) {
	t.Helper()
	tr := Echo{}.Chunks("m")
	var names []string
	var events []map[string]any
	emit := func(name string, data []byte) error {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(data, &ev))
		names, events = append(names, name), append(events, ev)
		return nil
	}
	for _, c := range chunks {
		require.NoError(t, tr.Chunk([]byte(c), emit))
	}
	complete, err := tr.Finish(emit)
	require.NoError(t, err)
	return names, events, complete
}

// wholeResponse translates a chat.completion and decodes the response.
func wholeResponse(t *testing.T, completion string) map[string]any {
	t.Helper()
	out, _, err := Echo{}.Response([]byte(completion), "m")
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal(out, &r))
	return r
}

// The id of a translated response is the key its answer is stored under:
// two answers whose upstream gave them one completion id (Ollama's are
// "chatcmpl-" and a number below a thousand) get two response ids, whole
// and streamed.
func TestResponsesIDsAreMintedNotTheUpstreams(t *testing.T) {
	completion := `{"id":"chatcmpl-42","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	first, second := wholeResponse(t, completion)["id"], wholeResponse(t, completion)["id"]
	require.IsType(t, "", first)
	assert.Regexp(t, `^resp_[a-z0-9]{20,}$`, first)
	assert.NotEqual(t, first, second, "whole")

	chunks := []string{
		`{"id":"chatcmpl-42","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}`,
		`{"id":"chatcmpl-42","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	}
	streamID := func() string {
		names, events, complete := responseEvents(t, chunks...)
		require.True(t, complete)
		id := events[0]["response"].(map[string]any)["id"].(string)
		require.Equal(t, "response.completed", names[len(names)-1])
		assert.Equal(t, id, events[len(events)-1]["response"].(map[string]any)["id"], "one id from created to completed")
		return id
	}
	a, b := streamID(), streamID()
	assert.Regexp(t, `^resp_[a-z0-9]{20,}$`, a)
	assert.NotEqual(t, a, b, "streamed")
}

// A model's refusal (OpenAI's message.refusal, content null; streamed as
// delta.refusal) reaches a /v1/responses client as a message whose content
// part is a refusal, streamed with response.refusal.delta and
// response.refusal.done, and goes back to the upstream with the next turn.
func TestResponsesRefusalIsAMessagesRefusalPart(t *testing.T) {
	const refusal = "I'm sorry, I cannot help with that."
	want := []any{map[string]any{"type": "refusal", "refusal": refusal}}

	r := wholeResponse(t, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"`+refusal+`"},"finish_reason":"stop"}]}`)
	require.Len(t, r["output"], 1, "whole")
	item := r["output"].([]any)[0].(map[string]any)
	assert.Equal(t, "message", item["type"])
	assert.Equal(t, want, item["content"], "whole")

	names, events, complete := responseEvents(t,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"refusal":"I cannot help with that."}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	)
	require.True(t, complete)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.refusal.delta", "response.refusal.delta", "response.refusal.done", "response.content_part.done",
		"response.output_item.done", "response.completed"}, names)
	var streamed responses.ResponseStreamEventUnion
	for i, name := range names {
		data, err := json.Marshal(events[i])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &streamed), "openai-go reads %s", name)
		switch name {
		case "response.content_part.added":
			assert.Equal(t, "refusal", streamed.Part.Type)
		case "response.refusal.delta":
			assert.Equal(t, int64(0), streamed.ContentIndex)
		case "response.refusal.done":
			assert.Equal(t, refusal, streamed.Refusal)
		}
	}
	final := streamed.AsResponseCompleted().Response
	require.Len(t, final.Output, 1, "streamed")
	require.Len(t, final.Output[0].Content, 1)
	assert.Equal(t, "refusal", final.Output[0].Content[0].Type)
	assert.Equal(t, refusal, final.Output[0].Content[0].Refusal)

	// The next turn carries the refusal (the gateway's stored answer
	// becomes input) to the upstream.
	item["content"] = want
	delete(item, "id")
	delete(item, "status")
	next, err := json.Marshal(map[string]any{"model": "m", "input": []any{
		map[string]any{"role": "user", "content": "help me"}, item, map[string]any{"role": "user", "content": "why?"}}})
	require.NoError(t, err)
	chat, err := ResponsesToOpenAIRequest(next, "m", ChatOptions{})
	require.NoError(t, err)
	assert.Contains(t, string(chat), `{"role":"assistant","content":"I'm sorry, I cannot help with that."}`)
}

// An answer the upstream's content filter cut short (finish_reason
// "content_filter") is incomplete for a /v1/responses client, for that
// reason, and not completed as if it were whole; one cut by the output cap
// still says max_output_tokens. The reason comes back from a Responses
// upstream to a chat client too.
func TestResponsesContentFilterIsIncomplete(t *testing.T) {
	for finish, reason := range map[string]any{"content_filter": "content_filter", "length": "max_output_tokens", "stop": nil} {
		t.Run(finish, func(t *testing.T) {
			status, event := "incomplete", "response.incomplete"
			details := any(map[string]any{"reason": reason})
			if reason == nil {
				status, event, details = "completed", "response.completed", nil
			}
			r := wholeResponse(t, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"I can"},"finish_reason":"`+finish+`"}]}`)
			assert.Equal(t, status, r["status"], "whole")
			assert.Equal(t, details, r["incomplete_details"], "whole")

			names, events, complete := responseEvents(t,
				`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"I can"}}]}`,
				`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"`+finish+`"}]}`)
			require.True(t, complete)
			assert.Equal(t, event, names[len(names)-1], "streamed")
			final := events[len(events)-1]["response"].(map[string]any)
			assert.Equal(t, status, final["status"], "streamed")
			assert.Equal(t, details, final["incomplete_details"], "streamed")

			// And back: the Responses answer to a chat completion.
			whole, err := json.Marshal(r)
			require.NoError(t, err)
			chat, _, err := ResponsesToOpenAIResponse(whole, "m")
			require.NoError(t, err)
			assert.Contains(t, string(chat), `"finish_reason":"`+finish+`"`, "chat, whole")
			var chunks []string
			in := NewResponsesToChunks("m", false)
			for i, name := range names {
				data, err := json.Marshal(events[i])
				require.NoError(t, err)
				require.NoError(t, in.Event(name, data, func(c []byte) error { chunks = append(chunks, string(c)); return nil }))
			}
			require.True(t, in.Done())
			assert.Contains(t, chunks[len(chunks)-1], `"finish_reason":"`+finish+`"`, "chat, streamed")
		})
	}
}

// A translated response repeats its request as the Responses API's does
// (instructions, tools, tool_choice, sampling, storage, the previous
// response), whole and in every streamed response; what the request left
// out keeps its default.
func TestResponsesRepeatTheirRequest(t *testing.T) {
	request := `{"model":"local/m","input":"hi","instructions":"be brief","store":false,"previous_response_id":"resp_abc",
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"tool_choice":"required",
		"parallel_tool_calls":false,"max_output_tokens":300,"temperature":0.2,"metadata":{"task":"t1"},"top_p":null}`
	want := map[string]any{
		"instructions": "be brief", "store": false, "previous_response_id": "resp_abc",
		"tools":       []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}},
		"tool_choice": "required", "parallel_tool_calls": false, "max_output_tokens": float64(300), "temperature": 0.2,
		"metadata": map[string]any{"task": "t1"}, "text": map[string]any{"format": map[string]any{"type": "text"}},
	}
	check := func(t *testing.T, r map[string]any, what string) {
		t.Helper()
		for k, v := range want {
			assert.Equal(t, v, r[k], "%s: %s", what, k)
		}
		assert.Contains(t, r, "top_p", "%s: a null keeps the default", what)
		assert.Nil(t, r["top_p"], "%s: the default is null", what)
		data, err := json.Marshal(r)
		require.NoError(t, err)
		var parsed responses.Response
		require.NoError(t, json.Unmarshal(data, &parsed), "openai-go reads %s", what)
		assert.Equal(t, "be brief", parsed.Instructions.OfString)
		assert.Equal(t, "get_weather", parsed.Tools[0].Name)
	}
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(request), &fields))
	echo := EchoFrom(fields)

	out, _, err := echo.Response([]byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`), "m")
	require.NoError(t, err)
	var whole map[string]any
	require.NoError(t, json.Unmarshal(out, &whole))
	check(t, whole, "whole")

	tr := echo.Chunks("m")
	emit := func(name string, data []byte) error {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(data, &ev))
		if r, ok := ev["response"].(map[string]any); ok {
			check(t, r, name)
		}
		return nil
	}
	require.NoError(t, tr.Chunk([]byte(`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"hi"}}]}`), emit))
	require.NoError(t, tr.Chunk([]byte(`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`), emit))
	complete, err := tr.Finish(emit)
	require.NoError(t, err)
	require.True(t, complete)

	none := wholeResponse(t, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	assert.Nil(t, none["instructions"], "nothing to repeat: the defaults")
	assert.Equal(t, []any{}, none["tools"])
	assert.Equal(t, "auto", none["tool_choice"])
}

// The item an answer was cut in (at max_output_tokens, or by a content
// filter) is incomplete, as the Responses API marks it, whole and
// streamed; the items before it and those of a whole answer are completed.
func TestResponsesCutItemIsIncomplete(t *testing.T) {
	for _, tc := range []struct {
		finish, status string
	}{{"length", "incomplete"}, {"content_filter", "incomplete"}, {"stop", "completed"}} {
		t.Run(tc.finish, func(t *testing.T) {
			r := wholeResponse(t, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Let me",`+
				`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":"`+tc.finish+`"}]}`)
			output := r["output"].([]any)
			require.Len(t, output, 2)
			assert.Equal(t, "completed", output[0].(map[string]any)["status"], "whole: the message before the call")
			assert.Equal(t, tc.status, output[1].(map[string]any)["status"], "whole: the call")

			r = wholeResponse(t, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Let me"},"finish_reason":"`+tc.finish+`"}]}`)
			assert.Equal(t, tc.status, r["output"].([]any)[0].(map[string]any)["status"], "whole: the message")

			names, events, complete := responseEvents(t,
				`{"id":"c","choices":[{"index":0,"delta":{"content":"Let me"}}]}`,
				toolsChunk(`[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]`),
				finishChunk(tc.finish))
			require.True(t, complete)
			var done []string
			for i, name := range names {
				if name == "response.output_item.done" {
					done = append(done, events[i]["item"].(map[string]any)["status"].(string))
				}
			}
			assert.Equal(t, []string{"completed", tc.status}, done, "streamed")
			final := events[len(events)-1]["response"].(map[string]any)["output"].([]any)
			assert.Equal(t, tc.status, final[1].(map[string]any)["status"], "streamed: the final response")
		})
	}
}
