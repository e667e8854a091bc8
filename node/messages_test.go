package node_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

const pathMessages = "/v1/messages"

// sseEvent is one named server-sent event.
type sseEvent struct {
	name string
	data string
}

// gatewayKey creates an API key of the default machine.
func gatewayKey(t *testing.T, sb *nodetest.Instance) string {
	t.Helper()
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "agent"})
	require.Equal(t, http.StatusCreated, key.Status)
	return key.JSON["key"].(string)
}

// postMessages sends a Messages request with the key in x-api-key, as
// Claude Code does, and reads a stream's events.
func postMessages(t *testing.T, sb *nodetest.Instance, key string, body map[string]any, headers ...string) (*http.Response, []byte, []sseEvent) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+pathMessages, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, raw, nil
	}
	var events []sseEvent
	var name string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, sseEvent{name, v})
			name = ""
		}
	}
	return resp, nil, events
}

// accumulated is a streamed message put together as the Anthropic SDK does.
type accumulated struct {
	text, thinking string
	tools          []map[string]any
	stopReason     string
	outputTokens   float64
}

func accumulate(t *testing.T, events []sseEvent) accumulated {
	t.Helper()
	var a accumulated
	partial := map[int]string{}
	kinds := map[int]map[string]any{}
	require.NotEmpty(t, events)
	assert.Equal(t, "message_start", events[0].name)
	assert.Equal(t, "message_stop", events[len(events)-1].name, "a whole stream ends with message_stop")
	for _, e := range events {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(e.data), &ev), e.data)
		assert.Equal(t, e.name, ev["type"], "the event's name is its type")
		idx, _ := ev["index"].(float64)
		switch e.name {
		case "content_block_start":
			kinds[int(idx)] = ev["content_block"].(map[string]any)
		case "content_block_delta":
			d := ev["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				a.text += d["text"].(string)
			case "thinking_delta":
				a.thinking += d["thinking"].(string)
			case "input_json_delta":
				partial[int(idx)] += d["partial_json"].(string)
			}
		case "content_block_stop":
			if b := kinds[int(idx)]; b["type"] == "tool_use" {
				var input map[string]any
				require.NoError(t, json.Unmarshal([]byte(partial[int(idx)]), &input))
				a.tools = append(a.tools, map[string]any{"name": b["name"], "id": b["id"], "input": input})
			}
		case "message_delta":
			a.stopReason, _ = ev["delta"].(map[string]any)["stop_reason"].(string)
			a.outputTokens, _ = ev["usage"].(map[string]any)["output_tokens"].(float64)
		}
	}
	return a
}

var weatherToolAnthropic = map[string]any{"name": "get_weather", "description": "weather of a city",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}

func messagesBody(model, text string, stream bool) map[string]any {
	return map[string]any{"model": model, "max_tokens": 256, "stream": stream,
		"system":   []map[string]any{{"type": "text", "text": "be brief"}},
		"messages": []map[string]any{{"role": "user", "content": text}}}
}

// /v1/messages against an Anthropic-shaped upstream is a pass-through: the
// model swapped, the client's anthropic headers forwarded, whole and
// streamed answers as the upstream sent them.
func TestMessagesPassThroughToAnthropic(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	key := gatewayKey(t, sb)

	resp, raw, _ := postMessages(t, sb, key, messagesBody("claude/claude-sonnet-4-6", "hello claude", false), "anthropic-beta", "tools-2024-05-16")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	var msg map[string]any
	require.NoError(t, json.Unmarshal(raw, &msg))
	assert.Equal(t, "message", msg["type"])
	assert.Equal(t, "echo: hello claude", msg["content"].([]any)[0].(map[string]any)["text"])
	assert.Equal(t, "end_turn", msg["stop_reason"])
	assert.NotEmpty(t, resp.Header.Get("X-Switchboard-Overhead-Us"))

	req := up.Requests()[0]
	assert.Equal(t, "/v1/messages", req.Path)
	assert.Equal(t, "sk-ant", req.Header.Get("x-api-key"), "the connection's key, never the gateway's")
	assert.Equal(t, "2023-06-01", req.Header.Get("anthropic-version"))
	assert.Equal(t, "tools-2024-05-16", req.Header.Get("anthropic-beta"), "anthropic-beta forwarded")
	var sent map[string]any
	require.NoError(t, json.Unmarshal(req.Body, &sent))
	assert.Equal(t, "claude-sonnet-4-6", sent["model"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "be brief"}}, sent["system"], "system blocks untouched")

	resp, _, events := postMessages(t, sb, key, messagesBody("claude/claude-sonnet-4-6", "hello claude", true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	a := accumulate(t, events)
	assert.Equal(t, "echo: hello claude", a.text)
	assert.Equal(t, "end_turn", a.stopReason)
	assert.Positive(t, a.outputTokens)

	body := messagesBody("claude/claude-sonnet-4-6", "Paris", true)
	body["tools"] = []any{weatherToolAnthropic}
	_, _, events = postMessages(t, sb, key, body)
	a = accumulate(t, events)
	require.Len(t, a.tools, 1)
	assert.Equal(t, "get_weather", a.tools[0]["name"])
	assert.Equal(t, "tool_use", a.stopReason)

	// count_tokens: the upstream's own count, model swapped.
	ct := sb.Do(t, http.MethodPost, pathMessages+"/count_tokens", map[string]any{"model": "claude/claude-sonnet-4-6",
		"messages": []map[string]any{{"role": "user", "content": "count these words please"}}}, "x-api-key", key)
	require.Equal(t, http.StatusOK, ct.Status, string(ct.Body))
	assert.Equal(t, float64(upstreamtest.Tokens("count these words please")), ct.JSON["input_tokens"])
	last := up.Requests()[len(up.Requests())-1]
	assert.Equal(t, upstreamtest.PathCountTokens, last.Path)
	assert.Contains(t, string(last.Body), `"model":"claude-sonnet-4-6"`)

	// A conversation another upstream served (Kimi's tool ids) is counted
	// as Anthropic takes it, as its next turn is sent.
	ct = sb.Do(t, http.MethodPost, pathMessages+"/count_tokens", map[string]any{"model": "claude/claude-sonnet-4-6",
		"messages": []map[string]any{
			{"role": "user", "content": "weather?"},
			{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "functions.get_weather:0", "name": "get_weather", "input": map[string]any{}}}},
			{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "functions.get_weather:0", "content": "sunny"}}},
		}}, "x-api-key", key)
	require.Equal(t, http.StatusOK, ct.Status, string(ct.Body))
	last = up.Requests()[len(up.Requests())-1]
	assert.Contains(t, string(last.Body), `"functions_get_weather_0"`)
}

// /v1/messages against an OpenAI-shaped upstream: translated both ways,
// whole and streamed, with tools.
func TestMessagesTranslatedToOpenAI(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-oai"))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-oai",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	key := gatewayKey(t, sb)

	resp, raw, _ := postMessages(t, sb, key, messagesBody(chatModel, "hello gpt", false))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	var msg map[string]any
	require.NoError(t, json.Unmarshal(raw, &msg))
	assert.Equal(t, "message", msg["type"])
	assert.Equal(t, "assistant", msg["role"])
	assert.Equal(t, "echo: hello gpt", msg["content"].([]any)[0].(map[string]any)["text"])
	assert.Equal(t, "end_turn", msg["stop_reason"])
	assert.Positive(t, msg["usage"].(map[string]any)["input_tokens"])

	req := up.Requests()[0]
	assert.Equal(t, "/v1/chat/completions", req.Path)
	var sent struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(req.Body, &sent))
	assert.Equal(t, "gpt-4o-mini", sent.Model)
	require.Len(t, sent.Messages, 2)
	assert.Equal(t, "system", sent.Messages[0].Role)
	assert.Equal(t, "be brief", sent.Messages[0].Content)

	resp, _, events := postMessages(t, sb, key, messagesBody(chatModel, "hello gpt", true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	a := accumulate(t, events)
	assert.Equal(t, "echo: hello gpt", a.text)
	assert.Equal(t, "end_turn", a.stopReason)
	assert.Positive(t, a.outputTokens)

	// A tool round: the call, then its result sent back.
	body := messagesBody(chatModel, "Paris", true)
	body["tools"] = []any{weatherToolAnthropic}
	_, _, events = postMessages(t, sb, key, body)
	a = accumulate(t, events)
	require.Len(t, a.tools, 1)
	assert.Equal(t, "get_weather", a.tools[0]["name"])
	assert.Equal(t, "Paris", a.tools[0]["input"].(map[string]any)["city"])
	assert.Equal(t, "tool_use", a.stopReason)

	body = messagesBody(chatModel, "Paris", false)
	body["tools"] = []any{weatherToolAnthropic}
	body["messages"] = []map[string]any{
		{"role": "user", "content": "Paris"},
		{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": a.tools[0]["id"], "name": "get_weather", "input": map[string]any{"city": "Paris"}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": a.tools[0]["id"], "content": "sunny"}}},
	}
	resp, raw, _ = postMessages(t, sb, key, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	last := up.Requests()[len(up.Requests())-1]
	assert.Contains(t, string(last.Body), `"role":"tool"`, "the tool result went upstream as a tool message")
	assert.Contains(t, string(last.Body), `"tool_calls"`)

	// More stop sequences than OpenAI takes: the client's 400, in
	// Anthropic's shape, with no upstream call.
	n := len(up.Requests())
	body = messagesBody(chatModel, "x", false)
	body["stop_sequences"] = []string{"a", "b", "c", "d", "e"}
	resp, raw, _ = postMessages(t, sb, key, body)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	var refused struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &refused), string(raw))
	assert.Equal(t, "error", refused.Type)
	assert.Equal(t, "invalid_request_error", refused.Error.Type)
	assert.Contains(t, refused.Error.Message, "stop sequences")
	assert.Len(t, up.Requests(), n)

	// count_tokens: no counting endpoint on this shape, so the gateway
	// estimates, with no upstream call.
	ct := sb.Do(t, http.MethodPost, pathMessages+"/count_tokens", map[string]any{"model": chatModel,
		"messages": []map[string]any{{"role": "user", "content": "count these words please"}}}, "x-api-key", key)
	require.Equal(t, http.StatusOK, ct.Status, string(ct.Body))
	assert.Positive(t, ct.JSON["input_tokens"])
	assert.Len(t, up.Requests(), n)
}

// Errors on /v1/messages are in Anthropic's shape; a stream that breaks
// after its first event ends with Anthropic's in-band error event, and one
// that fails before it falls back to the next connection.
func TestMessagesErrors(t *testing.T) {
	p := newPair(t)
	key := gatewayKey(t, p.sb)
	anthropicShape := func(t *testing.T, raw []byte, typ string) {
		t.Helper()
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &e), string(raw))
		assert.Equal(t, "error", e.Type, string(raw))
		assert.Equal(t, typ, e.Error.Type, string(raw))
		assert.NotEmpty(t, e.Error.Message)
	}

	body := messagesBody(chatModel, "x", false)
	delete(body, "max_tokens")
	resp, raw, _ := postMessages(t, p.sb, key, body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	anthropicShape(t, raw, "invalid_request_error")

	resp, raw, _ = postMessages(t, p.sb, "sk-0000000000000000-nope-00", messagesBody(chatModel, "x", false))
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	anthropicShape(t, raw, "authentication_error")

	resp, raw, _ = postMessages(t, p.sb, key, messagesBody("nosuchprovider/some-model", "x", false))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	anthropicShape(t, raw, "invalid_request_error")

	// An upstream's client error is passed through, in Anthropic's shape.
	p.primary.Enqueue(pathChat, upstreamtest.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "too long"))
	resp, raw, _ = postMessages(t, p.sb, key, messagesBody(chatModel, "x", false))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	anthropicShape(t, raw, "invalid_request_error")
	assert.Contains(t, string(raw), "too long")

	// Before the first event: the fallback answers.
	p.primary.Enqueue(pathChat, upstreamtest.Overloaded())
	resp, _, events := postMessages(t, p.sb, key, messagesBody(chatModel, "fallback please", true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "echo: fallback please", accumulate(t, events).text)

	for _, tc := range []struct {
		name  string
		fault upstreamtest.Fault
	}{
		{"8 stream cut after some tokens", upstreamtest.CutAfter(3)},
		{"10 malformed chunk mid-stream", upstreamtest.MalformedChunkAfter(3)},
		{"11 stream ends without finish", upstreamtest.NoFinish()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			key := gatewayKey(t, p.sb)
			p.primary.Enqueue(pathChat, tc.fault)
			resp, _, events := postMessages(t, p.sb, key, messagesBody(chatModel, "a long answer please", true))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.NotEmpty(t, events)
			last := events[len(events)-1]
			assert.Equal(t, "error", last.name, "never a clean message_stop")
			anthropicShape(t, []byte(last.data), "api_error")
			for _, e := range events {
				assert.NotEqual(t, "message_stop", e.name)
			}
			assert.Zero(t, p.fallback.Count(pathChat), "no fallback once the stream started")
		})
	}
}
