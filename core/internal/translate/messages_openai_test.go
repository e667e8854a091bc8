package translate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Golden tests of the Messages-to-Chat-Completions pair: Anthropic requests
// to chat requests, chat answers and chunk streams to Anthropic messages
// and events.

func TestMessagesRequestGolden(t *testing.T) {
	files := inputs(t, "testdata/messages/request/*.json", "testdata/anthropic/*.json")
	for _, name := range sortedKeys(files) {
		if !strings.HasPrefix(files[name], "testdata/messages/") {
			continue // the anthropic/ folder holds answers, not requests
		}
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(files[name])
			require.NoError(t, err)
			got, err := AnthropicToOpenAIRequest(body, "gpt-5", ChatOptions{})
			golden := filepath.Join("testdata/golden/messages/request", name+".json")
			if strings.HasPrefix(name, "error_") {
				require.ErrorIs(t, err, ErrInvalidRequest)
				goldenJSON(t, golden, map[string]any{"error": err.Error()})
				return
			}
			require.NoError(t, err)
			assertChatInvariants(t, got)
			goldenJSON(t, golden, decodeJSON(t, got))
		})
	}
}

// assertChatInvariants checks what OpenAI enforces: every tool message
// answers a tool call of an earlier assistant message.
func assertChatInvariants(t *testing.T, body []byte) {
	t.Helper()
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	calls := map[string]bool{}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
			assert.True(t, json.Valid([]byte(c.Function.Arguments)), "arguments are a JSON string")
		}
		if m.Role == "tool" {
			assert.True(t, calls[m.ToolCallID], "tool result %s answers an earlier call", m.ToolCallID)
		}
	}
}

func TestMessagesResponseGolden(t *testing.T) {
	files := inputs(t, "testdata/messages/response/*.json", "testdata/openai/*.response.json")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(files[name])
			require.NoError(t, err)
			got, u, err := OpenAIToAnthropicResponse(body, "gpt-5")
			require.NoError(t, err)
			v := decodeJSON(t, got).(map[string]any)
			assert.True(t, strings.HasPrefix(v["id"].(string), "msg_"))
			v["id"] = "msg_"
			goldenJSON(t, filepath.Join("testdata/golden/messages/response", name+".json"),
				map[string]any{"message": v, "usage": u})
		})
	}
}

// anthropicAccumulator puts a Messages stream together as the official SDKs
// do, failing on anything they would refuse.
type anthropicAccumulator struct {
	t       *testing.T
	started bool
	stopped bool
	open    map[int]map[string]any
	partial map[int]string
	Content []map[string]any `json:"content"`
	Stop    string           `json:"stop_reason"`
	Usage   map[string]any   `json:"usage"`
}

func (a *anthropicAccumulator) add(name string, data []byte) error {
	t := a.t
	var ev map[string]any
	require.NoError(t, json.Unmarshal(data, &ev))
	require.Equal(t, name, ev["type"], "event name is its type")
	require.False(t, a.stopped, "nothing after message_stop")
	if name != "message_start" {
		require.True(t, a.started, "message_start first")
	}
	idx := -1
	if f, ok := ev["index"].(float64); ok {
		idx = int(f)
	}
	switch name {
	case "message_start":
		require.False(t, a.started)
		a.started = true
		msg := ev["message"].(map[string]any)
		require.True(t, strings.HasPrefix(msg["id"].(string), "msg_"))
	case "content_block_start":
		require.Equal(t, len(a.Content), idx, "blocks start in order")
		require.Empty(t, a.open, "one block open at a time")
		b := ev["content_block"].(map[string]any)
		a.open[idx] = b
		a.Content = append(a.Content, b)
	case "content_block_delta":
		b := a.open[idx]
		require.NotNil(t, b, "delta of an open block")
		d := ev["delta"].(map[string]any)
		switch d["type"] {
		case "text_delta":
			require.Equal(t, "text", b["type"])
			b["text"] = b["text"].(string) + d["text"].(string)
		case "thinking_delta":
			require.Equal(t, "thinking", b["type"])
			b["thinking"] = b["thinking"].(string) + d["thinking"].(string)
		case "input_json_delta":
			require.Equal(t, "tool_use", b["type"])
			a.partial[idx] += d["partial_json"].(string)
		default:
			t.Fatalf("unknown delta %v", d)
		}
	case "content_block_stop":
		b := a.open[idx]
		require.NotNil(t, b)
		if b["type"] == "tool_use" {
			var in any
			require.NoError(t, json.Unmarshal([]byte(a.partial[idx]), &in))
			b["input"] = in
		}
		delete(a.open, idx)
	case "message_delta":
		a.Stop = ev["delta"].(map[string]any)["stop_reason"].(string)
		a.Usage = ev["usage"].(map[string]any)
	case "message_stop":
		require.Empty(t, a.open, "every block stopped")
		a.stopped = true
	}
	return nil
}

func TestMessagesStreamGolden(t *testing.T) {
	files := inputs(t, "testdata/messages/stream/*.txt", "testdata/openai/*.response.txt")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(files[name])
			require.NoError(t, err)
			tr := NewChunkToMessages("gpt-5")
			acc := &anthropicAccumulator{t: t, open: map[int]map[string]any{}, partial: map[int]string{}}
			var events []any
			emit := func(name string, data []byte) error {
				v := decodeJSON(t, data)
				if m, ok := v.(map[string]any); ok {
					if msg, ok := m["message"].(map[string]any); ok {
						msg["id"] = "msg_"
					}
				}
				events = append(events, map[string]any{"event": name, "data": v})
				return acc.add(name, data)
			}
			for _, ev := range parseSSE(raw) {
				if IsDone(ev.data) {
					break
				}
				require.NoError(t, tr.Chunk(ev.data, emit))
			}
			complete, err := tr.Finish(emit)
			require.NoError(t, err)
			require.True(t, complete)
			require.True(t, acc.stopped)
			goldenJSON(t, filepath.Join("testdata/golden/messages/stream", name+".json"),
				map[string]any{"events": events, "message": acc, "usage": tr.Usage()})
		})
	}
}

func TestMessagesStreamCutIsIncomplete(t *testing.T) {
	tr := NewChunkToMessages("m")
	var names []string
	emit := func(name string, _ []byte) error { names = append(names, name); return nil }
	require.NoError(t, tr.Chunk([]byte(`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}`), emit))
	complete, err := tr.Finish(emit)
	require.NoError(t, err)
	assert.False(t, complete, "no finish_reason: the caller ends the stream with an error")
	assert.NotContains(t, names, "message_stop")

	err = tr.Chunk([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`), emit)
	var ae *AnthropicError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "overloaded", ae.Message)
	require.ErrorIs(t, tr.Chunk([]byte(`{not json`), emit), ErrMalformedUpstream)
}

// A model's refusal streamed as delta.refusal (content null) reaches a
// /v1/messages client as the text it is in the whole answer, ending with
// end_turn: Claude too declines in text.
func TestMessagesStreamRefusalIsText(t *testing.T) {
	tr := NewChunkToMessages("m")
	acc := &anthropicAccumulator{t: t, open: map[int]map[string]any{}, partial: map[int]string{}}
	for _, c := range []string{
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"refusal":"I cannot help with that."}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	} {
		require.NoError(t, tr.Chunk([]byte(c), acc.add))
	}
	complete, err := tr.Finish(acc.add)
	require.NoError(t, err)
	require.True(t, complete)
	assert.Equal(t, []map[string]any{{"type": "text", "text": "I'm sorry, I cannot help with that."}}, acc.Content)
	assert.Equal(t, "end_turn", acc.Stop)
}

// Document blocks reach a chat upstream as what it can read: a PDF's data
// as a file, a plain-text document (source text, or content blocks) as
// text after its title, and a PDF given by URL as text naming the URL,
// never as file_data, which holds base64 data only.
func TestMessagesDocumentsReachAChatUpstream(t *testing.T) {
	for name, tc := range map[string]struct{ document, want string }{
		"pdf data": {
			`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"},"title":"a.pdf"}`,
			`{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQK","filename":"a.pdf"}}`,
		},
		"plain text": {
			`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The grass is green."},"title":"notes"}`,
			`{"type":"text","text":"notes\n\nThe grass is green."}`,
		},
		"content blocks": {
			`{"type":"document","source":{"type":"content","content":[{"type":"text","text":"The grass is green."},{"type":"text","text":"The sky is blue."}]},"title":"notes","context":"from the field guide"}`,
			`{"type":"text","text":"notes\n\nfrom the field guide\n\nThe grass is green.\n\nThe sky is blue."}`,
		},
		"pdf url": {
			`{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}`,
			`{"type":"text","text":"[document not attached, only its URL: https://example.com/a.pdf]"}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[` + tc.document + `,{"type":"text","text":"What does it say?"}]}]}`
			out, err := AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{})
			require.NoError(t, err)
			assertChatInvariants(t, out)
			var r struct {
				Messages []struct {
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			require.NoError(t, json.Unmarshal(out, &r))
			require.Len(t, r.Messages, 1)
			require.Len(t, r.Messages[0].Content, 2)
			assert.JSONEq(t, tc.want, string(r.Messages[0].Content[0]))
			assert.JSONEq(t, `{"type":"text","text":"What does it say?"}`, string(r.Messages[0].Content[1]))
		})
	}

	_, err := AnthropicToOpenAIRequest([]byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[
		{"type":"document","source":{"type":"file","file_id":"file_011"}}]}]}`), "gpt-4o", ChatOptions{})
	require.ErrorIs(t, err, ErrInvalidRequest, "an Anthropic file id means nothing upstream")
	assert.Contains(t, err.Error(), "messages[0].content[0].source.type")
}

// An image in a tool result (Claude Code's Read of a screenshot) reaches
// the model: a tool message holds text only, so it follows in a user
// message after the tool messages, and the tool message says so.
func TestToolResultImagesFollowTheToolMessages(t *testing.T) {
	body := `{"model":"m","max_tokens":64,"messages":[
		{"role":"user","content":"look at this"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"shot.png"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[
			{"type":"text","text":"the file"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
			{"type":"text","text":"what do you see?"}]}]}`
	got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-5", ChatOptions{ToolResultImages: true})
	require.NoError(t, err)
	var out struct {
		Messages []struct {
			Role       string          `json:"role"`
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(got, &out), "%s", got)
	require.Len(t, out.Messages, 4, "%s", got)
	tool, user := out.Messages[2], out.Messages[3]
	assert.Equal(t, "tool", tool.Role)
	assert.Equal(t, "toolu_1", tool.ToolCallID)
	var text string
	require.NoError(t, json.Unmarshal(tool.Content, &text))
	assert.Equal(t, "the file\n[image: in the next user message]", text)
	assert.Equal(t, "user", user.Role)
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	require.NoError(t, json.Unmarshal(user.Content, &parts), "%s", user.Content)
	require.Len(t, parts, 2)
	assert.Equal(t, "image_url", parts[0].Type)
	assert.Equal(t, "data:image/png;base64,iVBORw0KGgo=", parts[0].ImageURL.URL)
	assert.Equal(t, "what do you see?", parts[1].Text)

	// For a model that may not take images, and for an image the gateway
	// cannot send (a file id), the tool message notes it as before.
	fileImage := strings.Replace(body, `"source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`, `"source":{"type":"file","file_id":"file_1"}`, 1)
	for _, tc := range []struct {
		name string
		body string
		opts ChatOptions
	}{
		{"text-only model", body, ChatOptions{}},
		{"file source", fileImage, ChatOptions{ToolResultImages: true}},
	} {
		got, err := AnthropicToOpenAIRequest([]byte(tc.body), "m", tc.opts)
		require.NoError(t, err, tc.name)
		require.NoError(t, json.Unmarshal(got, &out), "%s", got)
		require.Len(t, out.Messages, 4, tc.name)
		require.NoError(t, json.Unmarshal(out.Messages[2].Content, &text), tc.name)
		assert.Equal(t, "the file\n[image]", text, tc.name)
		var userText string
		require.NoError(t, json.Unmarshal(out.Messages[3].Content, &userText), "%s: %s", tc.name, out.Messages[3].Content)
		assert.Equal(t, "what do you see?", userText, tc.name)
	}
}

// An assistant turn that held only thinking has nothing to carry over: it
// is left out, not sent as content null without tool calls, which OpenAI
// refuses.
func TestThinkingOnlyAssistantTurnLeftOut(t *testing.T) {
	body := `{"model":"m","max_tokens":64,"messages":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"}]},
		{"role":"user","content":"still there?"}]}`
	got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-5", ChatOptions{})
	require.NoError(t, err)
	var out struct {
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(got, &out), "%s", got)
	for _, m := range out.Messages {
		if m["role"] == "assistant" {
			assert.True(t, m["content"] != nil || m["tool_calls"] != nil, "an assistant message with neither: %s", got)
		}
	}
	require.Len(t, out.Messages, 2, "%s", got)
	assert.Equal(t, "still there?", out.Messages[1]["content"])
}

// OpenAI refuses tool_choice and parallel_tool_calls in a request without
// tools: a choice that asks nothing is left out when no tools remain, and
// one that forces a call to a tool the request does not offer is refused
// before anything is sent, as Anthropic refuses it.
func TestMessagesToolChoiceWithoutTools(t *testing.T) {
	const weather = `{"name":"get_weather","input_schema":{"type":"object"}}`
	for _, tc := range []struct {
		name, tools, choice string
		// want is the tool_choice sent (nil: none); param names the
		// refused member when the request is refused.
		want  any
		param string
	}{
		{name: "auto without tools", choice: `{"type":"auto","disable_parallel_tool_use":true}`},
		{name: "none with an empty list", tools: `[]`, choice: `{"type":"none"}`},
		{name: "any with an empty list", tools: `[]`, choice: `{"type":"any"}`, param: "tool_choice.type"},
		{name: "any without tools", choice: `{"type":"any"}`, param: "tool_choice.type"},
		{name: "tool without tools", tools: `[]`, choice: `{"type":"tool","name":"get_weather"}`, param: "tool_choice.name"},
		{name: "tool not offered", tools: `[` + weather + `]`, choice: `{"type":"tool","name":"get_time"}`, param: "tool_choice.name"},
		{name: "auto with a tool", tools: `[` + weather + `]`, choice: `{"type":"auto"}`, want: "auto"},
		{name: "tool offered", tools: `[` + weather + `]`, choice: `{"type":"tool","name":"get_weather"}`,
			want: map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"tool_choice":` + tc.choice
			if tc.tools != "" {
				body += `,"tools":` + tc.tools
			}
			body += `}`
			got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-5", ChatOptions{})
			if tc.param != "" {
				require.ErrorIs(t, err, ErrInvalidRequest)
				var re *RequestError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tc.param, re.Param, re.Message)
				return
			}
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, json.Unmarshal(got, &out), "%s", got)
			assert.Equal(t, tc.want, out["tool_choice"], "%s", got)
			if out["tools"] == nil {
				assert.NotContains(t, out, "parallel_tool_calls", "%s", got)
			}
		})
	}
}

// Claude Code's thinking reaches an upstream whose model reasons as the
// reasoning effort its budget pays for, one every reasoning model takes; it
// is left out where the model may not reason (a 400 there), and when
// thinking is not enabled.
func TestMessagesThinkingAsReasoningEffort(t *testing.T) {
	for _, tc := range []struct {
		name, thinking string
		reasons        bool
		want           string
	}{
		{"small budget", `{"type":"enabled","budget_tokens":1024}`, true, "low"},
		{"think", `{"type":"enabled","budget_tokens":4000}`, true, "low"},
		{"think hard", `{"type":"enabled","budget_tokens":10000}`, true, "medium"},
		{"high's budget", `{"type":"enabled","budget_tokens":16384}`, true, "high"},
		{"ultrathink", `{"type":"enabled","budget_tokens":31999}`, true, "high"},
		{"beyond high", `{"type":"enabled","budget_tokens":64000}`, true, "high"},
		{"adaptive", `{"type":"adaptive"}`, true, ""},
		{"disabled", `{"type":"disabled"}`, true, ""},
		{"absent", `null`, true, ""},
		{"model not known to reason", `{"type":"enabled","budget_tokens":10000}`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":64000,"thinking":` + tc.thinking + `,"messages":[{"role":"user","content":"hi"}]}`
			chat, err := AnthropicToOpenAIRequest([]byte(body), "gpt-5-codex", ChatOptions{Reasons: tc.reasons})
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, json.Unmarshal(chat, &out), "%s", chat)
			if tc.want == "" {
				assert.NotContains(t, out, "reasoning_effort", "%s", chat)
			} else {
				assert.Equal(t, tc.want, out["reasoning_effort"], "%s", chat)
			}

			// On to a Responses-only upstream: reasoning.effort.
			resp, err := OpenAIToResponsesRequest(chat, "gpt-5-codex")
			require.NoError(t, err)
			var sent struct {
				Reasoning *struct {
					Effort string `json:"effort"`
				} `json:"reasoning"`
			}
			require.NoError(t, json.Unmarshal(resp, &sent), "%s", resp)
			if tc.want == "" {
				assert.Nil(t, sent.Reasoning, "%s", resp)
			} else {
				require.NotNil(t, sent.Reasoning, "%s", resp)
				assert.Equal(t, tc.want, sent.Reasoning.Effort)
			}
		})
	}
}

// Claude Code's effort setting (output_config.effort, sent with adaptive
// thinking) is the reasoning effort of an upstream whose model reasons, up
// to the highest every reasoning model takes; it is the client's own
// choice, so it wins over a thinking budget's.
func TestMessagesOutputEffortAsReasoningEffort(t *testing.T) {
	for _, tc := range []struct {
		name, thinking, effort string
		reasons                bool
		want                   string
	}{
		{"claude code --effort low", `{"type":"adaptive","display":"omitted"}`, "low", true, "low"},
		{"medium", `{"type":"adaptive"}`, "medium", true, "medium"},
		{"high", `{"type":"adaptive"}`, "high", true, "high"},
		{"xhigh", `{"type":"adaptive"}`, "xhigh", true, "high"},
		{"max", `{"type":"adaptive"}`, "max", true, "high"},
		{"without thinking", `null`, "low", true, "low"},
		{"over a budget", `{"type":"enabled","budget_tokens":31999}`, "low", true, "low"},
		{"an effort Messages may add later", `{"type":"adaptive"}`, "extreme", true, ""},
		{"an effort Messages may add later, with a budget", `{"type":"enabled","budget_tokens":10000}`, "extreme", true, "medium"},
		{"model not known to reason", `{"type":"adaptive"}`, "low", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":32000,"thinking":` + tc.thinking + `,"output_config":{"effort":"` + tc.effort + `"},"messages":[{"role":"user","content":"hi"}]}`
			chat, err := AnthropicToOpenAIRequest([]byte(body), "gpt-5-codex", ChatOptions{Reasons: tc.reasons})
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, json.Unmarshal(chat, &out), "%s", chat)
			if tc.want == "" {
				assert.NotContains(t, out, "reasoning_effort", "%s", chat)
			} else {
				assert.Equal(t, tc.want, out["reasoning_effort"], "%s", chat)
			}
		})
	}
}

// Structured outputs (output_config.format, or the beta's top-level
// output_format, which the SDK's messages.parse sends) reach a chat upstream
// as its JSON schema response format, so the answer is JSON of the schema
// rather than prose the client cannot parse.
func TestMessagesOutputFormatAsResponseFormat(t *testing.T) {
	schema := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	for _, tc := range []struct {
		name, member string
	}{
		{"output_config.format", `"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}`},
		{"with an effort", `"output_config":{"effort":"low","format":{"type":"json_schema","schema":` + schema + `}}`},
		{"beta output_format", `"output_format":{"type":"json_schema","schema":` + schema + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":256,` + tc.member + `,"messages":[{"role":"user","content":"where is the Louvre?"}]}`
			chat, err := AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{})
			require.NoError(t, err)
			var out struct {
				ResponseFormat *struct {
					Type       string `json:"type"`
					JSONSchema struct {
						Name   string          `json:"name"`
						Schema json.RawMessage `json:"schema"`
						Strict *bool           `json:"strict"`
					} `json:"json_schema"`
				} `json:"response_format"`
			}
			require.NoError(t, json.Unmarshal(chat, &out), "%s", chat)
			require.NotNil(t, out.ResponseFormat, "%s", chat)
			assert.Equal(t, "json_schema", out.ResponseFormat.Type)
			assert.NotEmpty(t, out.ResponseFormat.JSONSchema.Name)
			assert.JSONEq(t, schema, string(out.ResponseFormat.JSONSchema.Schema))
		})
	}

	// A format Messages does not have is the client's 400.
	body := `{"model":"m","max_tokens":256,"output_config":{"format":{"type":"yaml"}},"messages":[{"role":"user","content":"hi"}]}`
	_, err := AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{})
	var re *RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "output_config.format.type", re.Param)

	// None asked for: none sent.
	chat, err := AnthropicToOpenAIRequest([]byte(`{"model":"m","max_tokens":256,"messages":[{"role":"user","content":"hi"}]}`), "gpt-4o", ChatOptions{})
	require.NoError(t, err)
	assert.NotContains(t, string(chat), "response_format")
}

// The two mappings read one table: a portable effort's thinking budget maps
// back to that effort.
func TestReasoningEffortRoundTrip(t *testing.T) {
	for _, effort := range []string{"low", "medium", "high"} {
		budget, ok := thinkingBudget(effort)
		require.True(t, ok)
		assert.Equal(t, effort, reasoningEffort(budget))
	}
}

// OpenAI answers 400 to more than four stop sequences: a Messages request
// with more, duplicates counted once, is refused for such an upstream before
// anything is sent, and passes whole to one without a known limit.
func TestMessagesStopSequencesLimit(t *testing.T) {
	for _, tc := range []struct {
		name, stop string
		limit      int
		want       []any
		refused    bool
	}{
		{"five to OpenAI", `["a","b","c","d","e"]`, 4, nil, true},
		{"four to OpenAI", `["a","b","c","d"]`, 4, []any{"a", "b", "c", "d"}, false},
		{"five with a duplicate", `["a","b","a","c","d"]`, 4, []any{"a", "b", "c", "d"}, false},
		{"five without a known limit", `["a","b","c","d","e"]`, 0, []any{"a", "b", "c", "d", "e"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":64,"stop_sequences":` + tc.stop + `,"messages":[{"role":"user","content":"hi"}]}`
			got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{MaxStopSequences: tc.limit})
			if tc.refused {
				require.ErrorIs(t, err, ErrInvalidRequest)
				var re *RequestError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, "stop_sequences", re.Param)
				assert.Contains(t, re.Message, "at most 4")
				return
			}
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, json.Unmarshal(got, &out), "%s", got)
			assert.Equal(t, tc.want, out["stop"], "%s", got)
		})
	}
}

// FuzzAnthropicToOpenAIRequest: any client body either translates into a
// valid chat request or fails with a RequestError; it never panics.
func FuzzAnthropicToOpenAIRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/messages/request/*.json")
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, opts := range []ChatOptions{{}, {Reasons: true, MaxStopSequences: 4}} {
			out, err := AnthropicToOpenAIRequest(body, "m", opts)
			if err != nil {
				require.ErrorIs(t, err, ErrInvalidRequest)
				continue
			}
			require.True(t, json.Valid(out))
			var req struct {
				Tools             json.RawMessage `json:"tools"`
				ToolChoice        json.RawMessage `json:"tool_choice"`
				ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
				Stop              []string        `json:"stop"`
				ReasoningEffort   *string         `json:"reasoning_effort"`
			}
			require.NoError(t, json.Unmarshal(out, &req))
			if req.Tools == nil {
				// OpenAI refuses both without tools.
				require.Nil(t, req.ToolChoice, "%s", out)
				require.Nil(t, req.ParallelToolCalls, "%s", out)
			}
			if opts.MaxStopSequences > 0 {
				require.LessOrEqual(t, len(req.Stop), opts.MaxStopSequences, "%s", out)
			}
			if req.ReasoningEffort != nil {
				require.True(t, opts.Reasons, "%s", out)
				require.Contains(t, []string{"low", "medium", "high"}, *req.ReasoningEffort, "%s", out)
			}
		}
	})
}

// FuzzChunkToMessages: any upstream chunk either translates into valid
// events or fails with an upstream or malformed error; it never panics.
func FuzzChunkToMessages(f *testing.F) {
	raw, err := os.ReadFile("testdata/messages/stream/reasoning_tools.txt")
	require.NoError(f, err)
	for _, ev := range parseSSE(raw) {
		f.Add(ev.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := NewChunkToMessages("m")
		emit := func(_ string, d []byte) error {
			require.True(t, json.Valid(d))
			return nil
		}
		for range 2 {
			if err := tr.Chunk(data, emit); err != nil {
				var ae *AnthropicError
				if !errors.As(err, &ae) {
					require.ErrorIs(t, err, ErrMalformedUpstream)
				}
				return
			}
		}
		_, err := tr.Finish(emit)
		require.NoError(t, err)
	})
}

// A document in a tool result (Claude Code's Read of a PDF or of a text
// file) reaches the model too: a plain-text one as text of the tool
// message, a PDF as a file part in the user message after the tool
// messages, as images go; without media it is noted, never dropped.
func TestToolResultDocumentsReachTheModel(t *testing.T) {
	body := `{"model":"m","max_tokens":64,"messages":[
		{"role":"user","content":"read these"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"a.pdf"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[
			{"type":"document","title":"notes.txt","source":{"type":"text","media_type":"text/plain","data":"line one"}},
			{"type":"document","title":"a.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQ="}}]}]}]}`
	var out struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-5", ChatOptions{ToolResultImages: true})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(got, &out), "%s", got)
	require.Len(t, out.Messages, 4, "%s", got)
	var text string
	require.NoError(t, json.Unmarshal(out.Messages[2].Content, &text))
	assert.Equal(t, "notes.txt\n\nline one\n[file: in the next user message]", text)
	assert.Equal(t, "user", out.Messages[3].Role)
	assert.JSONEq(t, `[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQ=","filename":"a.pdf"}}]`, string(out.Messages[3].Content))

	got, err = AnthropicToOpenAIRequest([]byte(body), "m", ChatOptions{})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(got, &out), "%s", got)
	require.Len(t, out.Messages, 3, "no user message of media: %s", got)
	require.NoError(t, json.Unmarshal(out.Messages[2].Content, &text))
	assert.Equal(t, "notes.txt\n\nline one\n[document]", text)
}

// Claude Code's ToolSearch answers with tool_reference blocks, which
// Anthropic expands into the referenced tools' definitions (the tool's
// description promises a <functions> block of them). A chat upstream gets
// that block as the tool message's text, so the model learns the tool it
// asked for is there, where it got an empty result.
func TestToolReferencesReachTheModel(t *testing.T) {
	body := `{"model":"m","max_tokens":64,
		"tools":[{"name":"ToolSearch","description":"find tools","input_schema":{"type":"object","properties":{"query":{"type":"string"}}}},
			{"name":"WebFetch","description":"Fetch a URL","input_schema":{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]},"defer_loading":true}],
		"messages":[
		{"role":"user","content":"fetch example.com"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ToolSearch","input":{"query":"select:WebFetch,Nope"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[
			{"type":"tool_reference","tool_name":"WebFetch"},{"type":"tool_reference","tool_name":"Nope"}]}]}]}`
	got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{})
	require.NoError(t, err)
	var out struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(got, &out), "%s", got)
	require.Len(t, out.Messages, 3, "%s", got)
	tool := out.Messages[2]
	require.Equal(t, "tool", tool.Role)
	assert.Equal(t, "<functions>\n"+
		`<function>{"description":"Fetch a URL","name":"WebFetch","parameters":{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}}</function>`+"\n"+
		`<function>{"name":"Nope"}</function>`+"\n</functions>", tool.Content)
	require.Len(t, out.Tools, 2)
	assert.Equal(t, "WebFetch", out.Tools[1].Function.Name, "the referenced tool is callable")
}

// A mid-conversation system message may change the tools (tool_addition,
// tool_removal: Claude Code sends them when its tools change in a
// session). A chat upstream, which declares tools once, gets the tools the
// conversation ends with: one defined inline is added, one removed (and
// not added back) is left out, one added by reference is among the
// request's already; the message's text stays a system message there.
func TestSystemToolChangesReachAChatUpstream(t *testing.T) {
	body := `{"model":"m","max_tokens":64,
		"tools":[{"name":"Read","input_schema":{"type":"object"}},
			{"name":"Gone","input_schema":{"type":"object"}},
			{"name":"WebFetch","input_schema":{"type":"object"},"defer_loading":true}],
		"messages":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"hello"},
		{"role":"system","content":[
			{"type":"text","text":"tools changed"},
			{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"name":"mcp__db__query","description":"query the db","input_schema":{"type":"object","properties":{"sql":{"type":"string"}}}}}},
			{"type":"tool_addition","tool":{"type":"tool_reference","name":"WebFetch"}},
			{"type":"tool_removal","tool":{"type":"tool_reference","name":"Gone"}}]},
		{"role":"system","content":[{"type":"tool_removal","tool":{"type":"tool_reference","name":"Read"}}]},
		{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_reference","name":"Read"}}]},
		{"role":"user","content":"query it"}]}`
	got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{})
	require.NoError(t, err)
	var out struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(got, &out), "%s", got)
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Function.Name)
	}
	assert.Equal(t, []string{"Read", "WebFetch", "mcp__db__query"}, names, "%s", got)
	assert.Equal(t, "query the db", out.Tools[2].Function.Description)
	assert.JSONEq(t, `{"type":"object","properties":{"sql":{"type":"string"}}}`, string(out.Tools[2].Function.Parameters))
	var roles []string
	for _, m := range out.Messages {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "system", "user"}, roles, "%s", got)
	assert.Equal(t, "tools changed", out.Messages[2].Content)

	// A change that names no tool is the client's 400.
	bad := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"tool_removal","tool":{"type":"tool_reference"}}]}]}`
	_, err = AnthropicToOpenAIRequest([]byte(bad), "gpt-4o", ChatOptions{})
	var re *RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "messages[1].content[0].tool", re.Param)
}

// Claude Code defers most tools (MCP tools, WebFetch, ...: defer_loading)
// and sends a DeferredToolPlaceholder no one may call. Anthropic shows its
// model a deferred tool only once a tool_reference (ToolSearch's answer)
// has loaded it, or tool_choice names it. A chat upstream gets the same
// tools, where it got every deferred definition on every turn and the
// model could call tools it was never shown.
func TestDeferredToolsWaitForAReference(t *testing.T) {
	tools := `"tools":[{"name":"Bash","input_schema":{"type":"object"}},
		{"name":"ToolSearch","description":"find tools","input_schema":{"type":"object"}},
		{"name":"WebFetch","description":"Fetch a URL","input_schema":{"type":"object"},"defer_loading":true},
		{"name":"mcp__gh__issue","input_schema":{"type":"object"},"defer_loading":true},
		{"name":"DeferredToolPlaceholder","description":"Reserved placeholder that keeps deferred tool loading active; never call this tool.","input_schema":{"type":"object"},"defer_loading":true}]`
	names := func(body string) ([]string, json.RawMessage) {
		t.Helper()
		got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{})
		require.NoError(t, err)
		var out struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
			ToolChoice json.RawMessage `json:"tool_choice"`
		}
		require.NoError(t, json.Unmarshal(got, &out), "%s", got)
		var n []string
		for _, tl := range out.Tools {
			n = append(n, tl.Function.Name)
		}
		return n, out.ToolChoice
	}

	first := `{"model":"m","max_tokens":64,` + tools + `,"messages":[{"role":"user","content":"fetch example.com"}]}`
	got, _ := names(first)
	assert.Equal(t, []string{"Bash", "ToolSearch"}, got, "nothing loaded yet")

	searched := `{"model":"m","max_tokens":64,` + tools + `,"messages":[
		{"role":"user","content":"fetch example.com"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ToolSearch","input":{"query":"select:WebFetch"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"WebFetch"}]}]}]}`
	got, _ = names(searched)
	assert.Equal(t, []string{"Bash", "ToolSearch", "WebFetch"}, got, "loaded by its reference")

	forced := `{"model":"m","max_tokens":64,` + tools + `,"tool_choice":{"type":"tool","name":"mcp__gh__issue"},"messages":[{"role":"user","content":"file it"}]}`
	got, choice := names(forced)
	assert.Equal(t, []string{"Bash", "ToolSearch", "mcp__gh__issue"}, got, "loaded by tool_choice")
	assert.JSONEq(t, `{"type":"function","function":{"name":"mcp__gh__issue"}}`, string(choice))

	// Anthropic's own tool search is a server tool no chat upstream runs:
	// left out as the others are, and with nothing to load them the
	// deferred tools are all sent, as if the request deferred none; naming
	// it in tool_choice is refused.
	server := `{"model":"m","max_tokens":64,"tools":[{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"},
		{"name":"get_weather","input_schema":{"type":"object"},"defer_loading":true},
		{"name":"get_time","input_schema":{"type":"object"},"defer_loading":true}],"messages":[{"role":"user","content":"weather?"}]}`
	got, _ = names(server)
	assert.Equal(t, []string{"get_weather", "get_time"}, got)
	_, err := AnthropicToOpenAIRequest([]byte(strings.Replace(server, `"messages"`, `"tool_choice":{"type":"tool","name":"tool_search_tool_regex"},"messages"`, 1)), "gpt-4o", ChatOptions{})
	var re *RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "tool_choice.name", re.Param)
}

// A server tool defined by a mid-conversation tool_addition, in a request
// that offers no tools of its own, is refused as one in the request's
// tools is, naming the message that defined it.
func TestSystemToolAdditionOfAServerTool(t *testing.T) {
	body := `{"model":"m","max_tokens":64,"messages":[
		{"role":"user","content":"hi"},
		{"role":"system","content":[{"type":"tool_addition","tool":{"type":"tool_definition","definition":{"type":"web_search_20250305","name":"web_search"}}}]},
		{"role":"user","content":"search"}]}`
	var err error
	require.NotPanics(t, func() { _, err = AnthropicToOpenAIRequest([]byte(body), "gpt-4o", ChatOptions{}) })
	var re *RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "messages", re.Param)
	assert.Contains(t, re.Message, `"web_search_20250305"`)
}

// A tool the request marks strict stays strict on a chat upstream: its
// arguments are held to the schema there too; other tools are left to the
// upstream's default.
func TestMessagesStrictToolsStayStrict(t *testing.T) {
	body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"weather?"}],"tools":[
		{"name":"get_weather","strict":true,"input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}},
		{"name":"search","input_schema":{"type":"object"}}]}`
	got, err := AnthropicToOpenAIRequest([]byte(body), "gpt-5", ChatOptions{})
	require.NoError(t, err)
	var out struct {
		Tools []struct {
			Function map[string]json.RawMessage `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(got, &out))
	require.Len(t, out.Tools, 2)
	assert.JSONEq(t, `true`, string(out.Tools[0].Function["strict"]), "get_weather")
	assert.NotContains(t, out.Tools[1].Function, "strict", "search")
}
