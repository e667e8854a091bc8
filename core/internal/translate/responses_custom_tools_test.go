package translate

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Custom tools (freeform input: Codex's apply_patch for the GPT-5 models it
// knows) reach a chat upstream as functions taking the input as their one
// string argument, with the grammar the input follows in its description;
// the calls come back as custom_tool_call items carrying the input, whole
// and streamed, and a history's custom calls and outputs go up as the
// function calls and tool messages they were.
func TestCustomToolsOnAChatUpstream(t *testing.T) {
	request := `{"model":"gpt-5.5","tool_choice":{"type":"custom","name":"apply_patch"},"tools":[
		{"type":"function","name":"exec_command","parameters":{"type":"object"}},
		{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch"}}],
		"input":[{"role":"user","content":"fix it"},
		{"type":"custom_tool_call","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n\"x\""},
		{"type":"custom_tool_call_output","call_id":"call_p","output":"Done!"}]}`
	chat, err := ResponsesToOpenAIRequest([]byte(request), "m", ChatOptions{})
	require.NoError(t, err)
	var sent struct {
		Tools []struct {
			Function struct {
				Name        string
				Description string
				Parameters  struct {
					Properties struct {
						Input struct{ Type, Description string }
					}
					Required []string
				}
			}
		}
		ToolChoice json.RawMessage `json:"tool_choice"`
		Messages   []struct {
			Role       string
			Content    json.RawMessage
			ToolCalls  []outChatToolCall `json:"tool_calls"`
			ToolCallID string            `json:"tool_call_id"`
		}
	}
	require.NoError(t, json.Unmarshal(chat, &sent), "%s", chat)
	require.Len(t, sent.Tools, 2, "%s", chat)
	patch := sent.Tools[1].Function
	assert.Equal(t, "apply_patch", patch.Name)
	assert.Equal(t, "Edit files.", patch.Description)
	assert.Equal(t, "string", patch.Parameters.Properties.Input.Type)
	assert.Contains(t, patch.Parameters.Properties.Input.Description, "start: begin_patch", "the grammar")
	assert.Equal(t, []string{"input"}, patch.Parameters.Required)
	assert.JSONEq(t, `{"type":"function","function":{"name":"apply_patch"}}`, string(sent.ToolChoice))
	require.Len(t, sent.Messages, 3, "%s", chat)
	require.Len(t, sent.Messages[1].ToolCalls, 1)
	call := sent.Messages[1].ToolCalls[0]
	assert.Equal(t, "call_p", call.ID)
	assert.JSONEq(t, `{"input":"*** Begin Patch\n\"x\""}`, call.Function.Arguments)
	assert.Equal(t, "tool", sent.Messages[2].Role)
	assert.Equal(t, "call_p", sent.Messages[2].ToolCallID)
	assert.JSONEq(t, `"Done!"`, string(sent.Messages[2].Content))

	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(request), &fields))
	echo := EchoFrom(fields)
	const args = `{\"input\":\"*** Begin Patch\\n\\\"x\\\"\"}`
	out, _, err := echo.Response([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":"`+args+`"}},
		{"id":"call_2","type":"function","function":{"name":"exec_command","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`), "m")
	require.NoError(t, err)
	var whole responses.Response
	require.NoError(t, json.Unmarshal(out, &whole))
	require.Len(t, whole.Output, 2, "%s", out)
	custom := whole.Output[0].AsCustomToolCall()
	assert.Equal(t, "custom_tool_call", whole.Output[0].Type, "whole")
	assert.Equal(t, "call_1", custom.CallID)
	assert.Equal(t, "apply_patch", custom.Name)
	assert.Equal(t, "*** Begin Patch\n\"x\"", custom.Input)
	assert.Equal(t, "function_call", whole.Output[1].Type, "a function stays a function")

	tr := echo.Chunks("m")
	var names []string
	var final responses.Response
	input := ""
	emit := func(name string, data []byte) error {
		names = append(names, name)
		var ev responses.ResponseStreamEventUnion
		require.NoError(t, json.Unmarshal(data, &ev))
		switch name {
		case "response.custom_tool_call_input.delta":
			input += ev.Delta
		case "response.custom_tool_call_input.done":
			assert.Equal(t, input, ev.Input, "the deltas add up to the input")
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
		return nil
	}
	for _, c := range []string{
		toolsChunk(`[{"index":0,"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin"}}]`),
		toolsChunk(`[{"index":0,"function":{"arguments":" Patch\\n\\\"x\\\"\"}"}}]`),
		finishChunk("tool_calls"),
	} {
		require.NoError(t, tr.Chunk([]byte(c), emit))
	}
	complete, err := tr.Finish(emit)
	require.NoError(t, err)
	require.True(t, complete)
	assert.NotContains(t, names, "response.function_call_arguments.delta")
	assert.Contains(t, names, "response.custom_tool_call_input.done")
	require.Len(t, final.Output, 1)
	assert.Equal(t, "custom_tool_call", final.Output[0].Type, "streamed")
	assert.Equal(t, "*** Begin Patch\n\"x\"", final.Output[0].AsCustomToolCall().Input)
	assert.Equal(t, "call_1", final.Output[0].AsCustomToolCall().CallID)
}
