package node_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// deepSeekUpstream is reasoningUpstream behaving as DeepSeek's thinking
// mode.
func deepSeekUpstream(t *testing.T, opts ...upstreamtest.Option) (*nodetest.Instance, *upstreamtest.Server, string) {
	t.Helper()
	return reasoningUpstream(t, append([]upstreamtest.Option{upstreamtest.WithThinkingMode()}, opts...)...)
}

// reasoningUpstream is a serve instance with one openai-compatible
// connection ("ds", model "ds/deepseek-v4-flash") on a fake upstream with
// opts, and a key.
func reasoningUpstream(t *testing.T, opts ...upstreamtest.Option) (*nodetest.Instance, *upstreamtest.Server, string) {
	t.Helper()
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, opts...)
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-ds", "name": "ds", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "ds", "enabledModels": []string{"deepseek-v4-flash"}}})
	return sb, up, gatewayKey(t, sb)
}

// reasoningServers are the upstreams of the agents' tool loops on
// reasoning models: DeepSeek's thinking mode, whose reasoning must go back
// as reasoning_content, and a server refusing that member (as Groq), which
// must be asked again without it; check asserts what each was sent.
var reasoningServers = []struct {
	name  string
	opt   upstreamtest.Option
	check func(*testing.T, *upstreamtest.Server)
}{
	{"deepseek thinking mode", upstreamtest.WithThinkingMode(), toolTurnsCarryReasoning},
	{"server refusing reasoning_content", upstreamtest.WithStrictReasoning(), reasoningRefusedThenDropped},
}

// toolTurns is every assistant message with tool calls in the chat
// requests the upstream was sent, in order.
func toolTurns(up *upstreamtest.Server) []map[string]any {
	var turns []map[string]any
	for _, r := range up.Requests() {
		var body struct {
			Messages []map[string]any `json:"messages"`
		}
		if json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		for _, m := range body.Messages {
			if m["role"] == "assistant" && m["tool_calls"] != nil {
				turns = append(turns, m)
			}
		}
	}
	return turns
}

// toolTurnsCarryReasoning asserts that every tool call's turn the upstream
// was sent carries upstreamtest.ThinkingText back, and that there was one.
func toolTurnsCarryReasoning(t *testing.T, up *upstreamtest.Server) {
	t.Helper()
	turns := toolTurns(up)
	for _, m := range turns {
		assert.Equal(t, upstreamtest.ThinkingText, m["reasoning_content"], "the tool call's turn carries its reasoning back")
	}
	require.NotEmpty(t, turns, "the agent sent a tool call's turn back")
}

// reasoningRefusedThenDropped asserts that the upstream, which refuses
// reasoning_content, was sent it once and then the same turn without it.
func reasoningRefusedThenDropped(t *testing.T, up *upstreamtest.Server) {
	t.Helper()
	with, without := 0, 0
	for _, m := range toolTurns(up) {
		if _, ok := m["reasoning_content"]; ok {
			with++
		} else {
			without++
		}
	}
	assert.Positive(t, with, "the tool call's turn went up with its reasoning first")
	assert.Positive(t, without, "and again without it once refused")
}

// lastAssistantReasoning is the reasoning_content of the assistant message
// with tool calls in the upstream's last chat request (nil: none sent).
func lastAssistantReasoning(t *testing.T, up *upstreamtest.Server) any {
	t.Helper()
	reqs := up.Requests()
	require.NotEmpty(t, reqs)
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &body))
	for _, m := range body.Messages {
		if m["role"] == "assistant" && m["tool_calls"] != nil {
			return m["reasoning_content"]
		}
	}
	t.Fatalf("no assistant message with tool calls in %s", reqs[len(reqs)-1].Body)
	return nil
}

// Claude Code's tool loop on a DeepSeek model behind an openai-compatible
// connection: the first answer reasons and calls a tool, the second request
// sends the history back (the thinking block, the tool use, its result).
// The thinking goes up as the assistant message's reasoning_content, which
// DeepSeek's thinking mode requires; it was dropped, and every second
// request of a tool loop failed with DeepSeek's 400 "The reasoning_content
// in the thinking mode must be passed back to the API.".
func TestMessagesToolLoopSendsReasoningBackToCompatible(t *testing.T) {
	sb, up, key := deepSeekUpstream(t)
	for _, stream := range []bool{true, false} {
		first := messagesBody("ds/deepseek-v4-flash", "Weather in Paris?", stream)
		first["tools"] = []any{weatherToolAnthropic}
		r, raw, events := postMessages(t, sb, key, first)
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
		var content []map[string]any
		if stream {
			a := accumulate(t, events)
			require.Len(t, a.tools, 1)
			assert.Equal(t, upstreamtest.ThinkingText, a.thinking)
			content = []map[string]any{{"type": "thinking", "thinking": a.thinking, "signature": ""},
				{"type": "tool_use", "id": a.tools[0]["id"], "name": a.tools[0]["name"], "input": a.tools[0]["input"]}}
		} else {
			var msg struct {
				Content []map[string]any `json:"content"`
			}
			require.NoError(t, json.Unmarshal(raw, &msg))
			content = msg.Content
		}
		var callID any
		for _, b := range content {
			if b["type"] == "tool_use" {
				callID = b["id"]
			}
		}
		require.NotNil(t, callID, "the first answer calls the tool: %v", content)

		second := messagesBody("ds/deepseek-v4-flash", "Weather in Paris?", stream)
		second["tools"] = []any{weatherToolAnthropic}
		second["messages"] = []map[string]any{
			{"role": "user", "content": "Weather in Paris?"},
			{"role": "assistant", "content": content},
			{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": callID, "content": "sunny"}}},
		}
		r, raw, events = postMessages(t, sb, key, second)
		require.Equal(t, http.StatusOK, r.StatusCode, "stream %v: %s", stream, raw)
		if stream {
			assert.Equal(t, upstreamtest.EchoPrefix+"sunny", accumulate(t, events).text)
		} else {
			assert.Contains(t, string(raw), upstreamtest.EchoPrefix+"sunny")
		}
		assert.Equal(t, upstreamtest.ThinkingText, lastAssistantReasoning(t, up), "stream %v", stream)
	}
}

// Codex's tool loop on the same upstream: the reasoning item the gateway
// answered with goes back in the input before the function call, and
// reaches the upstream as the reasoning_content of the call's assistant
// message; it was left out, and the second request got DeepSeek's 400.
func TestResponsesToolLoopSendsReasoningBackToCompatible(t *testing.T) {
	sb, up, key := deepSeekUpstream(t)
	tool := map[string]any{"type": "function", "name": "get_weather", "description": "weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}
	user := map[string]any{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": "Weather in Paris?"}}}
	for _, stream := range []bool{true, false} {
		var output []map[string]any
		if stream {
			_, final, err := streamResponse(t, sdk(t, sb), responses.ResponseNewParams{Model: "ds/deepseek-v4-flash",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")},
				Tools: []responses.ToolUnionParam{weatherToolResponses}})
			require.NoError(t, err)
			require.NotNil(t, final)
			var r struct {
				Output []map[string]any `json:"output"`
			}
			require.NoError(t, json.Unmarshal([]byte(final.RawJSON()), &r))
			output = r.Output
		} else {
			r := sb.Do(t, http.MethodPost, pathResponses, map[string]any{"model": "ds/deepseek-v4-flash", "input": []any{user}, "tools": []any{tool}},
				"Authorization", "Bearer "+key)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			for _, it := range r.JSON["output"].([]any) {
				output = append(output, it.(map[string]any))
			}
		}
		input := []any{user}
		var callID any
		for _, it := range output {
			input = append(input, it)
			if it["type"] == "function_call" {
				callID = it["call_id"]
			}
		}
		require.Equal(t, "reasoning", output[0]["type"], "the first answer reasons: %v", output)
		require.NotNil(t, callID, "the first answer calls the tool: %v", output)
		input = append(input, map[string]any{"type": "function_call_output", "call_id": callID, "output": "sunny"})
		r := sb.Do(t, http.MethodPost, pathResponses, map[string]any{"model": "ds/deepseek-v4-flash", "input": input, "tools": []any{tool}},
			"Authorization", "Bearer "+key)
		require.Equal(t, http.StatusOK, r.Status, "stream %v: %s", stream, r.Body)
		assert.Contains(t, string(r.Body), upstreamtest.EchoPrefix+"sunny")
		assert.Equal(t, upstreamtest.ThinkingText, lastAssistantReasoning(t, up), "stream %v", stream)
	}
}

// DeepSeek's own refusal of a turn (the reasoning is wanted) is not
// retried; a server that refuses the reasoning sent back with a 422
// (Mistral's strict schema: "Extra inputs are not permitted") is asked
// again without it, as one refusing with a 400 is.
func TestReasoningRefusedWith422IsDropped(t *testing.T) {
	sb, up, key := reasoningUpstream(t)
	history := []map[string]any{
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": []map[string]any{{"type": "thinking", "thinking": "Use the tool.", "signature": ""},
			{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{"city": "Paris"}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}}},
	}
	body := messagesBody("ds/deepseek-v4-flash", "Weather in Paris?", false)
	body["tools"], body["messages"] = []any{weatherToolAnthropic}, history

	up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusBadRequest,
		"{\"error\":{\"message\":\"Missing `reasoning_content` field in the assistant message at message index 2.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}"))
	r, raw, _ := postMessages(t, sb, key, body)
	require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", raw)
	require.Len(t, up.Requests(), 1, "DeepSeek's refusal is passed on, not asked again")
	assert.Contains(t, string(up.Requests()[0].Body), `"reasoning_content":"Use the tool."`)

	up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusUnprocessableEntity,
		`{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","messages",1,"assistant","reasoning_content"],"msg":"Extra inputs are not permitted","input":"Use the tool."}]},"type":"invalid_request_message_error","param":null,"code":null}`))
	r, raw, _ = postMessages(t, sb, key, body)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	reqs := up.Requests()[1:]
	require.Len(t, reqs, 2, "refused once, asked again once")
	assert.Contains(t, string(reqs[0].Body), `"reasoning_content":"Use the tool."`)
	assert.NotContains(t, string(reqs[1].Body), `reasoning_content`)
}

// A server that refused the reasoning sent back is remembered for the
// connection and model: the next turns of the tool loop go without it at
// once, where each was refused once before being asked again (a wasted
// round trip on every request of an agent's loop). A refusal of a turn
// sent without it (the server now wants it, as DeepSeek) ends the memory,
// and the turn is asked again with it.
func TestReasoningRefusalIsRemembered(t *testing.T) {
	sb, up, key := reasoningUpstream(t, upstreamtest.WithStrictReasoning())
	body := messagesBody("ds/deepseek-v4-flash", "Weather in Paris?", false)
	body["tools"] = []any{weatherToolAnthropic}
	body["messages"] = []map[string]any{
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": []map[string]any{{"type": "thinking", "thinking": "Use the tool.", "signature": ""},
			{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{"city": "Paris"}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}}},
	}
	sent := func() []string {
		var bodies []string
		for _, r := range up.Requests() {
			bodies = append(bodies, string(r.Body))
		}
		return bodies
	}
	for range 3 {
		r, raw, _ := postMessages(t, sb, key, body)
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	}
	bodies := sent()
	require.Len(t, bodies, 4, "refused once, then each turn asked once")
	assert.Contains(t, bodies[0], `"reasoning_content"`)
	for _, b := range bodies[1:] {
		assert.NotContains(t, b, `reasoning_content`)
	}

	up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusBadRequest,
		`{"error":{"message":"`+upstreamtest.MsgReasoningNotPassedBack+`","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`))
	r, raw, _ := postMessages(t, sb, key, body)
	require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", raw)
	assert.Contains(t, string(raw), "unsupported", "the refusal of the turn asked again with its reasoning")
	r, raw, _ = postMessages(t, sb, key, body)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	bodies = sent()
	require.Len(t, bodies, 8, "the refused turn asked again with its reasoning; the next sent with it, refused, asked again")
	assert.NotContains(t, bodies[4], `reasoning_content`)
	assert.Contains(t, bodies[5], `"reasoning_content"`)
	assert.Contains(t, bodies[6], `"reasoning_content"`)
	assert.NotContains(t, bodies[7], `reasoning_content`)
}
