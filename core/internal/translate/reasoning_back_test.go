package translate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// messagesOf is the messages member of a translated chat request, as JSON.
func messagesOf(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	return string(req.Messages)
}

const toolLoopTool = `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`

// A Messages tool loop's thinking goes back as reasoning_content where the
// upstream wants it: an assistant message's thinking blocks (joined a blank
// line apart, as an answer's are), none of a redacted_thinking's, and an
// empty one on a tool call's turn that did not think once another did.
func TestMessagesReasoningBack(t *testing.T) {
	body := `{"model":"m","max_tokens":9,` + toolLoopTool + `,"messages":[
		{"role":"user","content":"Weather?"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"Paris first.","signature":"s"},{"type":"redacted_thinking","data":"xyz"},
			{"type":"thinking","thinking":"Then Rome.","signature":"s"},{"type":"text","text":"Looking."},
			{"type":"tool_use","id":"c1","name":"get_weather","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"}]},
		{"role":"assistant","content":[{"type":"redacted_thinking","data":"xyz"},{"type":"tool_use","id":"c2","name":"get_weather","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c2","content":"rain"}]},
		{"role":"assistant","content":[{"type":"text","text":"Sunny, then rain."}]},
		{"role":"user","content":"Thanks"}]}`
	got, err := AnthropicToOpenAIRequest([]byte(body), "m", ChatOptions{ReasoningBack: true})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"role":"user","content":"Weather?"},
		{"role":"assistant","content":"Looking.","reasoning_content":"Paris first.\n\nThen Rome.",
			"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","content":"sunny","tool_call_id":"c1"},
		{"role":"assistant","content":null,"reasoning_content":"",
			"tool_calls":[{"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","content":"rain","tool_call_id":"c2"},
		{"role":"assistant","content":"Sunny, then rain."},
		{"role":"user","content":"Thanks"}]`, messagesOf(t, got))

	// Without the option the thinking is left out, as before.
	off, err := AnthropicToOpenAIRequest([]byte(body), "m", ChatOptions{})
	require.NoError(t, err)
	assert.NotContains(t, string(off), "reasoning_content")
}

// A conversation that carries no reasoning (only redacted thinking, or
// none) sends no reasoning_content at all, even on tool calls' turns:
// strict servers refuse members they do not know.
func TestMessagesReasoningBackNoneWithoutReasoning(t *testing.T) {
	body := `{"model":"m","max_tokens":9,` + toolLoopTool + `,"messages":[
		{"role":"user","content":"Weather?"},
		{"role":"assistant","content":[{"type":"redacted_thinking","data":"xyz"},{"type":"thinking","thinking":"","signature":"s"},
			{"type":"tool_use","id":"c1","name":"get_weather","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"}]}]}`
	on, err := AnthropicToOpenAIRequest([]byte(body), "m", ChatOptions{ReasoningBack: true})
	require.NoError(t, err)
	assert.NotContains(t, string(on), "reasoning_content")
	off, err := AnthropicToOpenAIRequest([]byte(body), "m", ChatOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(off), string(on))
}

// A Responses tool loop's reasoning items (what the gateway answers a chat
// upstream's reasoning_content with: a summary, or reasoning_text content)
// go back as the reasoning_content of the turn's next assistant message,
// the one with its calls or its text; reasoning that ends a turn alone is
// dropped, and a call's turn without reasoning gets an empty one.
func TestResponsesReasoningBack(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"input":[
		{"type":"message","role":"user","content":"Weather?"},
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Paris first."},{"type":"summary_text","text":"Then Rome."}]},
		{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"},
		{"type":"function_call","call_id":"c2","name":"get_weather","arguments":"{}"},
		{"type":"function_call_output","call_id":"c2","output":"rain"},
		{"type":"reasoning","id":"rs_2","summary":[],"content":[{"type":"reasoning_text","text":"Both known."}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sunny, then rain."}]},
		{"type":"reasoning","id":"rs_3","summary":[{"type":"summary_text","text":"Nothing said."}]},
		{"type":"message","role":"user","content":"Thanks"}]}`
	got, err := ResponsesToOpenAIRequest([]byte(body), "m", ChatOptions{ReasoningBack: true})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"role":"user","content":"Weather?"},
		{"role":"assistant","content":null,"reasoning_content":"Paris first.\n\nThen Rome.",
			"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","content":"sunny","tool_call_id":"c1"},
		{"role":"assistant","content":null,"reasoning_content":"",
			"tool_calls":[{"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","content":"rain","tool_call_id":"c2"},
		{"role":"assistant","content":"Sunny, then rain.","reasoning_content":"Both known."},
		{"role":"user","content":"Thanks"}]`, messagesOf(t, got))

	off, err := ResponsesToOpenAIRequest([]byte(body), "m", ChatOptions{})
	require.NoError(t, err)
	assert.NotContains(t, string(off), "reasoning_content")
}

// Reasoning before an assistant's text and its calls of one turn is that
// one message's; reasoning items without text (an encrypted one) send none.
func TestResponsesReasoningBackOneTurn(t *testing.T) {
	body := `{"model":"m","input":[
		{"type":"message","role":"user","content":"Weather?"},
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Look it up."}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Looking."}]},
		{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"Paris."}]},
		{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`
	got, err := ResponsesToOpenAIRequest([]byte(body), "m", ChatOptions{ReasoningBack: true})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"role":"user","content":"Weather?"},
		{"role":"assistant","content":"Looking.","reasoning_content":"Look it up.\n\nParis.",
			"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","content":"sunny","tool_call_id":"c1"}]`, messagesOf(t, got))

	encrypted := `{"model":"m","input":[{"type":"message","role":"user","content":"Weather?"},
		{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},
		{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`
	got, err = ResponsesToOpenAIRequest([]byte(encrypted), "m", ChatOptions{ReasoningBack: true})
	require.NoError(t, err)
	assert.NotContains(t, string(got), "reasoning_content")
}

// A server that takes no reasoning_content member (Groq, Cerebras, strict
// schemas) is asked again without it; DeepSeek's refusals for the member
// missing, and other refusals, are not.
func TestWithoutRefusedReasoning(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"a<b"},{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}]}`)
	for _, raw := range []string{
		`{"error":{"message":"'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : property 'reasoning_content' is unsupported)]","type":"invalid_request_error"}}`,
		`{"message":"messages.1.assistant.reasoning_content: property 'messages.1.assistant.reasoning_content' is unsupported","type":"invalid_request_error","param":"validation_error","code":"wrong_api_format"}`,
		`{"error":{"message":"Invalid value for 'messages[1]': Additional properties are not allowed ('reasoning_content' was unexpected)","type":"invalid_request_error"}}`,
		`{"object":"error","message":"[{'type': 'extra_forbidden', 'loc': ('body', 'messages', 1, 'assistant', 'reasoning_content'), 'msg': 'Extra inputs are not permitted'}]","type":"BadRequestError","code":400}`,
	} {
		out, ok := WithoutRefusedReasoning(body, []byte(raw))
		require.True(t, ok, raw)
		var got struct {
			Messages []map[string]json.RawMessage `json:"messages"`
			Tools    json.RawMessage              `json:"tools"`
			Model    string                       `json:"model"`
		}
		require.NoError(t, json.Unmarshal(out, &got))
		require.Len(t, got.Messages, 3)
		assert.NotContains(t, got.Messages[1], "reasoning_content")
		assert.Contains(t, got.Messages[1], "tool_calls", "the rest of the message stays")
		assert.Equal(t, "m", got.Model)
		assert.NotEmpty(t, got.Tools)
		assert.Contains(t, string(out), `"a<b"`, "text is not HTML-escaped")
	}
	for _, raw := range []string{
		`{"error":{"message":"The reasoning_content in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
		`{"error":{"message":"Missing reasoning_content field in the assistant message at message index 1.","type":"invalid_request_error"}}`,
		"{\"error\":{\"message\":\"Missing `reasoning_content` field in the assistant message at message index 2. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}",
		"{\"error\":{\"message\":\"The `reasoning_content` in the thinking mode must be passed back to the API.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}",
		`{"error":{"message":"Invalid 'messages[1].tool_calls[0].id'","type":"invalid_request_error"}}`,
	} {
		_, ok := WithoutRefusedReasoning(body, []byte(raw))
		assert.False(t, ok, raw)
	}
	_, ok := WithoutRefusedReasoning([]byte(`{"messages":[{"role":"user","content":"x"}]}`), []byte(`property 'reasoning_content' is unsupported`))
	assert.False(t, ok, "nothing to take out")
}
