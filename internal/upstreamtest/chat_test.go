package upstreamtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

const weatherTool = `{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather",` +
	`"parameters":{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},` +
	`"days":{"type":"integer"}},"required":["location","unit"]}}}`

const timeTool = `{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":["string","null"]}},"required":["tz"]}}}`

// chunk is the part of a chat.completion.chunk the tests inspect.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      *string `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// parseChunks parses the data of OpenAI events up to [DONE], which must be
// the last event.
func parseChunks(t *testing.T, evs []sseEvent) []chunk {
	t.Helper()
	require.NotEmpty(t, evs)
	require.Equal(t, "[DONE]", evs[len(evs)-1].Data, "the stream must end with data: [DONE]")
	var chunks []chunk
	for _, ev := range evs[:len(evs)-1] {
		require.Empty(t, ev.Event, "OpenAI streams have no event names")
		var c chunk
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &c), "chunk is not JSON: %s", ev.Data)
		require.Equal(t, "chat.completion.chunk", c.Object)
		chunks = append(chunks, c)
	}
	return chunks
}

func TestChatCompletion(t *testing.T) {
	s := upstreamtest.New(t)
	resp, body := post(t, s, upstreamtest.PathChatCompletions,
		`{"model":"gpt-5-nano","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there!"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))

	requireSameShape(t, decode(t, fixture(t, "openai/chat-basic.json")), decode(t, body))
	var got struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.True(t, strings.HasPrefix(got.ID, "chatcmpl-"))
	require.Equal(t, "gpt-5-nano", got.Model)
	require.Equal(t, "assistant", got.Choices[0].Message.Role)
	require.Equal(t, "echo: Hello there!", got.Choices[0].Message.Content)
	require.Equal(t, "stop", got.Choices[0].FinishReason)
	require.Equal(t, upstreamtest.Tokens("Be brief.")+upstreamtest.Tokens("Hello there!"), got.Usage.PromptTokens)
	require.Equal(t, upstreamtest.Tokens("echo: Hello there!"), got.Usage.CompletionTokens)
	require.Equal(t, got.Usage.PromptTokens+got.Usage.CompletionTokens, got.Usage.TotalTokens)
}

func TestChatCompletionContentParts(t *testing.T) {
	s := upstreamtest.New(t)
	_, body := post(t, s, upstreamtest.PathChatCompletions,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"two"}]},{"role":"assistant","content":"ignored"}]}`)
	require.Contains(t, string(body), `"content":"echo: one two"`)
}

func TestChatCompletionIDsAreUnique(t *testing.T) {
	s := upstreamtest.New(t)
	ids := map[string]bool{}
	for range 20 {
		_, body := post(t, s, upstreamtest.PathChatCompletions, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
		var got struct{ ID string }
		require.NoError(t, json.Unmarshal(body, &got))
		require.Len(t, got.ID, len("chatcmpl-")+29)
		require.False(t, ids[got.ID], "duplicate id %s", got.ID)
		ids[got.ID] = true
	}
}

func TestChatStream(t *testing.T) {
	s := upstreamtest.New(t)
	evs := stream(t, s, upstreamtest.PathChatCompletions,
		`{"model":"gpt-5-nano","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi there, how are you?"}]}`)

	// Compare with the recorded stream: role chunk, finish chunk, usage chunk.
	recorded, err := readSSE(strings.NewReader(string(fixture(t, "openai/chat-streaming-detailed-usage.sse"))))
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, recorded, 4)
	require.Equal(t, "[DONE]", recorded[3].Data)
	n := len(evs)
	requireSameShape(t, decode(t, []byte(recorded[0].Data)), decode(t, []byte(evs[0].Data)))
	requireSameShape(t, decode(t, []byte(recorded[1].Data)), decode(t, []byte(evs[n-3].Data)))
	requireSameShape(t, decode(t, []byte(recorded[2].Data)), decode(t, []byte(evs[n-2].Data)))

	chunks := parseChunks(t, evs)
	require.Equal(t, "assistant", *chunks[0].Choices[0].Delta.Role)
	var text strings.Builder
	contentChunks := 0
	for _, c := range chunks[1 : len(chunks)-2] {
		require.Equal(t, chunks[0].ID, c.ID)
		require.Equal(t, "gpt-5-nano", c.Model)
		require.Nil(t, c.Choices[0].FinishReason)
		require.Nil(t, c.Usage)
		text.WriteString(*c.Choices[0].Delta.Content)
		contentChunks++
	}
	require.Equal(t, "echo: Hi there, how are you?", text.String())
	require.Greater(t, contentChunks, 3, "content must be split over several chunks")

	finish := chunks[len(chunks)-2]
	require.Equal(t, "stop", *finish.Choices[0].FinishReason)
	usage := chunks[len(chunks)-1]
	require.Empty(t, usage.Choices)
	require.NotNil(t, usage.Usage)
	require.Equal(t, upstreamtest.Tokens("Hi there, how are you?"), usage.Usage.PromptTokens)
	require.Equal(t, upstreamtest.Tokens("echo: Hi there, how are you?"), usage.Usage.CompletionTokens)
}

func TestChatStreamWithoutUsage(t *testing.T) {
	s := upstreamtest.New(t)
	evs := stream(t, s, upstreamtest.PathChatCompletions,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"Hello you"}]}`)
	chunks := parseChunks(t, evs)
	require.Len(t, chunks, 5) // role, "echo:", " Hello", " you", finish
	require.Equal(t, "stop", *chunks[len(chunks)-1].Choices[0].FinishReason, "no usage chunk after the finish chunk")

	// Same shapes as the recorded stream: role chunk, content chunks, finish chunk.
	recorded, err := readSSE(strings.NewReader(string(fixture(t, "openai/chat-streaming.sse"))))
	require.ErrorIs(t, err, io.EOF)
	rn := len(recorded)
	require.Equal(t, "[DONE]", recorded[rn-1].Data)
	requireSameShape(t, decode(t, []byte(recorded[0].Data)), decode(t, []byte(evs[0].Data)))
	for _, ev := range evs[1:4] {
		requireSameShape(t, decode(t, []byte(recorded[1].Data)), decode(t, []byte(ev.Data)))
	}
	requireSameShape(t, decode(t, []byte(recorded[rn-2].Data)), decode(t, []byte(evs[4].Data)))
	for _, ev := range evs {
		require.NotContains(t, ev.Data, `"usage"`)
	}

	// include_obfuscation false drops the padding field, as with OpenAI.
	evs = stream(t, s, upstreamtest.PathChatCompletions,
		`{"model":"m","stream":true,"stream_options":{"include_obfuscation":false},"messages":[{"role":"user","content":"Hello"}]}`)
	for _, ev := range evs {
		require.NotContains(t, ev.Data, `"obfuscation"`)
	}
}

func TestChatStreamUsageInFinishChunk(t *testing.T) {
	s := upstreamtest.New(t, upstreamtest.WithUsageInFinishChunk())
	evs := stream(t, s, upstreamtest.PathChatCompletions,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello"}]}`)
	chunks := parseChunks(t, evs)
	last := chunks[len(chunks)-1]
	require.Len(t, last.Choices, 1)
	require.Equal(t, "stop", *last.Choices[0].FinishReason)
	require.NotNil(t, last.Usage)
	require.Equal(t, 1, last.Usage.PromptTokens)
	for _, c := range chunks[:len(chunks)-1] {
		require.Nil(t, c.Usage)
	}
}

func TestChatToolCall(t *testing.T) {
	s := upstreamtest.New(t)
	_, body := post(t, s, upstreamtest.PathChatCompletions,
		`{"model":"gpt-5-nano","tool_choice":"auto","tools":[`+weatherTool+`],"messages":[{"role":"user","content":"Weather in Boston?"}]}`)
	requireSameShape(t, decode(t, fixture(t, "openai/chat-tools.json")), decode(t, body))

	var got struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	msg := got.Choices[0].Message
	require.Nil(t, msg.Content)
	require.Equal(t, "tool_calls", got.Choices[0].FinishReason)
	require.Len(t, msg.ToolCalls, 1)
	call := msg.ToolCalls[0]
	require.True(t, strings.HasPrefix(call.ID, "call_"))
	require.Equal(t, "function", call.Type)
	require.Equal(t, "get_current_weather", call.Function.Name)
	require.JSONEq(t, `{"location":"Weather in Boston?","unit":"celsius"}`, call.Function.Arguments)

	// After the tool result, the model answers with text.
	_, body = post(t, s, upstreamtest.PathChatCompletions,
		`{"model":"m","tools":[`+weatherTool+`],"messages":[{"role":"user","content":"Weather in Boston?"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{}"}}]},`+
			`{"role":"tool","tool_call_id":"call_1","content":"22 degrees"}]}`)
	require.Contains(t, string(body), `"content":"echo: 22 degrees"`)
	require.Contains(t, string(body), `"finish_reason":"stop"`)
}

func TestChatToolChoice(t *testing.T) {
	s := upstreamtest.New(t)
	tools := `"tools":[` + weatherTool + `,` + timeTool + `]`
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	names := func(body []byte) []string {
		var got struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Name string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(body, &got))
		var ns []string
		for _, c := range got.Choices[0].Message.ToolCalls {
			ns = append(ns, c.Function.Name)
		}
		return ns
	}
	_, body := post(t, s, upstreamtest.PathChatCompletions, `{"model":"m",`+tools+`,`+msgs+`}`)
	require.Equal(t, []string{"get_current_weather", "get_time"}, names(body))
	_, body = post(t, s, upstreamtest.PathChatCompletions, `{"model":"m","parallel_tool_calls":false,`+tools+`,`+msgs+`}`)
	require.Equal(t, []string{"get_current_weather"}, names(body))
	_, body = post(t, s, upstreamtest.PathChatCompletions, `{"model":"m","tool_choice":{"type":"function","function":{"name":"get_time"}},`+tools+`,`+msgs+`}`)
	require.Equal(t, []string{"get_time"}, names(body))
	_, body = post(t, s, upstreamtest.PathChatCompletions, `{"model":"m","tool_choice":"none",`+tools+`,`+msgs+`}`)
	require.Empty(t, names(body))
	require.Contains(t, string(body), `"content":"echo: hi"`)
}

func TestChatToolCallStream(t *testing.T) {
	s := upstreamtest.New(t)
	evs := stream(t, s, upstreamtest.PathChatCompletions,
		`{"model":"m","stream":true,"tools":[`+weatherTool+`,`+timeTool+`],"messages":[{"role":"user","content":"Weather in Boston?"}]}`)
	chunks := parseChunks(t, evs)
	require.Equal(t, "assistant", *chunks[0].Choices[0].Delta.Role)

	type call struct{ id, name, args string }
	var calls []call
	for _, c := range chunks[:len(chunks)-1] {
		require.Nil(t, c.Choices[0].FinishReason)
		require.Len(t, c.Choices[0].Delta.ToolCalls, 1)
		tc := c.Choices[0].Delta.ToolCalls[0]
		if tc.ID != "" { // first delta of a call: id, type, name
			require.Equal(t, len(calls), tc.Index)
			require.Equal(t, "function", tc.Type)
			require.Empty(t, tc.Function.Arguments)
			calls = append(calls, call{id: tc.ID, name: tc.Function.Name})
			continue
		}
		require.Equal(t, len(calls)-1, tc.Index)
		require.Empty(t, tc.Function.Name)
		calls[tc.Index].args += tc.Function.Arguments
	}
	require.Len(t, calls, 2)
	require.Equal(t, "get_current_weather", calls[0].name)
	require.JSONEq(t, `{"location":"Weather in Boston?","unit":"celsius"}`, calls[0].args)
	require.Equal(t, "get_time", calls[1].name)
	require.JSONEq(t, `{"tz":"Weather in Boston?"}`, calls[1].args)
	require.NotEqual(t, calls[0].id, calls[1].id)
	require.Equal(t, "tool_calls", *chunks[len(chunks)-1].Choices[0].FinishReason)
}

func TestChatUnicodeStream(t *testing.T) {
	s := upstreamtest.New(t)
	text := "Hello 世界! 🌍 \"quoted\" \\ back\tslash\nnew line \u2028"
	req, err := json.Marshal(map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user", "content": text}}})
	require.NoError(t, err)
	chunks := parseChunks(t, stream(t, s, upstreamtest.PathChatCompletions, string(req)))
	var got strings.Builder
	for _, c := range chunks[1 : len(chunks)-1] {
		got.WriteString(*c.Choices[0].Delta.Content)
	}
	require.Equal(t, upstreamtest.EchoPrefix+text, got.String())
}

func TestChatValidation(t *testing.T) {
	s := upstreamtest.New(t)
	for _, tc := range []struct {
		name, body, code, param, message string
	}{
		{"bad JSON", `{"model":`, "", "", "We could not parse the JSON body of your request."},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "", "", "you must provide a model parameter"},
		{"no messages", `{"model":"m"}`, "missing_required_parameter", "messages", "Missing required parameter: 'messages'."},
		{"empty messages", `{"model":"m","messages":[]}`, "empty_array", "messages", "Invalid 'messages': empty array."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, s, upstreamtest.PathChatCompletions, tc.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			recorded := "openai/chat-no-messages.json" // code and param set
			if tc.code == "" {
				recorded = "openai/embeddings-bad-request.json" // code and param null
			}
			requireSameShape(t, decode(t, fixture(t, recorded)), decode(t, body))
			var e openAIError
			require.NoError(t, json.Unmarshal(body, &e))
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Equal(t, tc.code, ptr(e.Error.Code))
			require.Equal(t, tc.param, ptr(e.Error.Param))
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func ptr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
