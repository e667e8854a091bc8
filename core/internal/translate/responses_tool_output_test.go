package translate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An image a tool returns in its function_call_output (Codex's view_image
// does) reaches a model that takes images in a user message after the
// tool messages, as a Messages tool result's does; a model that may not
// take images is told an image was there. Either way the tool message
// says so, never an empty string.
func TestFunctionCallOutputImages(t *testing.T) {
	const png = "data:image/png;base64,iVBORw0KGgo="
	body := `{"model":"m","input":[
		{"role":"user","content":"look at both"},
		{"type":"function_call","call_id":"call_a","name":"view_image","arguments":"{\"path\":\"a.png\"}"},
		{"type":"function_call","call_id":"call_b","name":"view_image","arguments":"{\"path\":\"b.png\"}"},
		{"type":"function_call_output","call_id":"call_a","output":[{"type":"input_image","image_url":"` + png + `"}]},
		{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"b:"},{"type":"input_image","image_url":"` + png + `"}]}]}`
	read := func(t *testing.T, opts ChatOptions) []reqMessage {
		t.Helper()
		out, err := ResponsesToOpenAIRequest([]byte(body), "m", opts)
		require.NoError(t, err)
		return chatMessagesOfRequest(t, out)
	}

	msgs := read(t, ChatOptions{ToolResultImages: true})
	require.Len(t, msgs, 5, "user, the calls, two tool messages, the images")
	assert.Equal(t, []string{"tool", "tool"}, []string{msgs[2].Role, msgs[3].Role}, "the tool messages follow the calls")
	assert.JSONEq(t, `"[image: in the next user message]"`, string(msgs[2].Content))
	assert.JSONEq(t, `"b:\n[image: in the next user message]"`, string(msgs[3].Content))
	assert.Equal(t, "user", msgs[4].Role)
	assert.JSONEq(t, `[{"type":"image_url","image_url":{"url":"`+png+`"}},{"type":"image_url","image_url":{"url":"`+png+`"}}]`, string(msgs[4].Content))

	msgs = read(t, ChatOptions{})
	require.Len(t, msgs, 4, "no user message of images")
	assert.JSONEq(t, `"[image]"`, string(msgs[2].Content))
	assert.JSONEq(t, `"b:\n[image]"`, string(msgs[3].Content))
}

// Reasoning between a turn's function_call_output items (a Responses
// client replays its reasoning items where they came) sends nothing, and
// the images of the tool messages wait for the turn's last tool message:
// chat upstreams take a turn's tool messages only right after its calls.
func TestFunctionCallOutputImagesAfterReasoning(t *testing.T) {
	const png = "data:image/png;base64,iVBORw0KGgo="
	body := `{"model":"m","input":[
		{"role":"user","content":"look at both"},
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"function_call","call_id":"call_a","name":"view_image","arguments":"{}"},
		{"type":"function_call","call_id":"call_b","name":"view_image","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_a","output":[{"type":"input_image","image_url":"` + png + `"}]},
		{"type":"reasoning","id":"rs_2","summary":[]},
		{"type":"function_call_output","call_id":"call_b","output":"done"},
		{"role":"user","content":"and now?"}]}`
	out, err := ResponsesToOpenAIRequest([]byte(body), "m", ChatOptions{ToolResultImages: true})
	require.NoError(t, err)
	msgs := chatMessagesOfRequest(t, out)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role+" "+m.ToolCallID)
	}
	assert.Equal(t, []string{"user ", "assistant ", "tool call_a", "tool call_b", "user ", "user "}, roles)
	assert.JSONEq(t, `[{"type":"image_url","image_url":{"url":"`+png+`"}}]`, string(msgs[4].Content))
}

// A function_call_output without a call_id (Codex sends its create_goal
// tool's goal_objective so, with a namespace) answers the call of its
// name still waiting for an output, or reaches the model as user text
// naming the tool when there is none: a chat upstream refuses a tool
// message without tool_call_id, and the Anthropic request could not be
// made of one.
func TestFunctionCallOutputWithoutCallID(t *testing.T) {
	body := `{"model":"m","input":[
		{"role":"user","content":"set a goal"},
		{"type":"function_call","call_id":"call_a","name":"shell","arguments":"{}"},
		{"type":"function_call","call_id":"call_g","name":"goal_objective","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_a","output":"ok"},
		{"type":"function_call_output","name":"goal_objective","namespace":"agent","output":"goal set"},
		{"type":"function_call_output","name":"goal_objective","namespace":"agent","output":"ship it"},
		{"role":"user","content":"go on"}]}`
	out, err := ResponsesToOpenAIRequest([]byte(body), "m", ChatOptions{})
	require.NoError(t, err)
	msgs := chatMessagesOfRequest(t, out)
	require.Len(t, msgs, 6, "user, the calls, two tool messages, the unpaired output, user")
	assert.Equal(t, "tool", msgs[3].Role)
	assert.Equal(t, "call_g", msgs[3].ToolCallID, "the output answers the waiting call of its name")
	assert.JSONEq(t, `"goal set"`, string(msgs[3].Content))
	assert.Equal(t, "user", msgs[4].Role)
	assert.Contains(t, string(msgs[4].Content), "goal_objective")
	assert.Contains(t, string(msgs[4].Content), "ship it")

	_, err = OpenAIToAnthropicRequest(out, "claude", AnthropicOptions{})
	require.NoError(t, err, "an Anthropic upstream takes the turn")
}
