package translate

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every recorded chat request goes to Responses and back to chat with its
// conversation intact: roles, tool calls and their results.
func TestChatToResponsesRoundTrip(t *testing.T) {
	files := inputs(t, "testdata/openai/*.request.json")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(files[name])
			require.NoError(t, err)
			resp, err := OpenAIToResponsesRequest(body, "gpt-5")
			if name == "chat-bad-request" {
				return
			}
			require.NoError(t, err)
			back, err := ResponsesToOpenAIRequest(resp, "gpt-5", ChatOptions{})
			require.NoError(t, err)
			assertChatInvariants(t, back)
			var in, out struct {
				Messages []struct {
					Role      string          `json:"role"`
					ToolCalls json.RawMessage `json:"tool_calls"`
				} `json:"messages"`
			}
			require.NoError(t, json.Unmarshal(body, &in))
			require.NoError(t, json.Unmarshal(back, &out))
			var inRoles, outRoles []string
			for _, m := range in.Messages {
				r := m.Role
				if r == "developer" {
					r = "system"
				}
				inRoles = append(inRoles, r)
			}
			for _, m := range out.Messages {
				outRoles = append(outRoles, m.Role)
			}
			// System messages are joined into one set of instructions.
			assert.Equal(t, dedupeSystem(inRoles), outRoles)
		})
	}
}

func dedupeSystem(roles []string) []string {
	var out []string
	sys := false
	for _, r := range roles {
		if r == "system" {
			sys = true
			continue
		}
		out = append(out, r)
	}
	if sys {
		out = append([]string{"system"}, out...)
	}
	return out
}

// A Responses stream becomes chunks the openai-go accumulator reads: text,
// a tool call from its argument deltas, the finish reason and the usage.
func TestResponsesToChunks(t *testing.T) {
	events := []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","delta":"thinking"}`,
		`{"type":"response.output_text.delta","item_id":"msg_1","delta":"Hello"}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"city\":"}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"\"Paris\"}"}`,
		`{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15,"input_tokens_details":{"cached_tokens":4},"output_tokens_details":{"reasoning_tokens":2}}}}`,
	}
	tr := NewResponsesToChunks("gpt-5", true)
	acc := openai.ChatCompletionAccumulator{}
	for _, e := range events {
		require.NoError(t, tr.Event("", []byte(e), func(c []byte) error {
			var chunk openai.ChatCompletionChunk
			require.NoError(t, json.Unmarshal(c, &chunk))
			require.True(t, acc.AddChunk(chunk), "%s", c)
			return nil
		}))
	}
	require.True(t, tr.Done())
	assert.Equal(t, "Hello", acc.Choices[0].Message.Content)
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "call_1", acc.Choices[0].Message.ToolCalls[0].ID)
	assert.JSONEq(t, `{"city":"Paris"}`, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "tool_calls", string(acc.Choices[0].FinishReason))
	assert.Equal(t, int64(15), acc.Usage.TotalTokens)
	assert.Equal(t, Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, CachedTokens: 4, ReasoningTokens: 2}, tr.Usage())

	err := NewResponsesToChunks("m", false).Event("response.failed", []byte(`{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}`), func([]byte) error { return nil })
	var ae *AnthropicError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "boom", ae.Message)
}

// FuzzResponsesToChunks: any upstream event translates into valid chunks
// or fails with an upstream or malformed error; it never panics.
func FuzzResponsesToChunks(f *testing.F) {
	f.Add([]byte(`{"type":"response.output_text.delta","delta":"x"}`))
	f.Add([]byte(`{"type":"response.output_item.added","item":{"type":"function_call","id":"a"}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"input_tokens":-1}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := NewResponsesToChunks("m", true)
		for range 2 {
			err := tr.Event("", data, func(c []byte) error {
				require.True(t, json.Valid(c))
				return nil
			})
			if err != nil {
				return
			}
		}
	})
}

// A PDF Claude Code attaches (a base64 document block) reaches a
// Responses-only upstream as an input_file, through the chat request both
// translations share; so does a chat client's file, by data or by id.
func TestFileReachesAResponsesUpstreamAsInputFile(t *testing.T) {
	messages := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[
		{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"},"title":"spec.pdf"},
		{"type":"text","text":"Summarise"}]}]}`
	chat, err := AnthropicToOpenAIRequest([]byte(messages), "gpt-5", ChatOptions{})
	require.NoError(t, err)
	fromChat := func(t *testing.T, chat string) []any {
		t.Helper()
		out, err := OpenAIToResponsesRequest([]byte(chat), "gpt-5")
		require.NoError(t, err)
		var r struct {
			Input []struct {
				Content []any `json:"content"`
			} `json:"input"`
		}
		require.NoError(t, json.Unmarshal(out, &r))
		require.Len(t, r.Input, 1)
		return r.Input[0].Content
	}
	assert.Equal(t, []any{
		map[string]any{"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0xLjQK", "filename": "spec.pdf"},
		map[string]any{"type": "input_text", "text": "Summarise"},
	}, fromChat(t, string(chat)), "a Messages document")

	assert.Equal(t, []any{map[string]any{"type": "input_file", "file_id": "file-abc"}},
		fromChat(t, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`), "a chat client's uploaded file")

	_, err = OpenAIToResponsesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf"}}]}]}`), "gpt-5")
	require.ErrorIs(t, err, ErrInvalidRequest, "a file with neither data nor id")
	assert.Contains(t, err.Error(), "messages[0].content[0].file")
}

// A Responses upstream's refusal (a message's refusal part, streamed as
// response.refusal.delta) reaches a chat client as message.refusal and
// delta.refusal, and a Messages client, through them, as text.
func TestResponsesUpstreamRefusalReachesChatAndMessages(t *testing.T) {
	const refusal = "I'm sorry, I cannot help with that."
	upstream := `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",
		"content":[{"type":"refusal","refusal":"` + refusal + `"}]}]}`
	chat, _, err := ResponsesToOpenAIResponse([]byte(upstream), "m")
	require.NoError(t, err)
	var c openai.ChatCompletion
	require.NoError(t, json.Unmarshal(chat, &c))
	assert.Equal(t, refusal, c.Choices[0].Message.Refusal, "chat, whole")
	assert.Empty(t, c.Choices[0].Message.Content)
	msg, _, err := OpenAIToAnthropicResponse(chat, "m")
	require.NoError(t, err)
	assert.Contains(t, string(msg), `"text":"`+refusal+`"`, "messages, whole")

	events := []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"in_progress","content":[]}}`,
		`{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"refusal","refusal":""}}`,
		`{"type":"response.refusal.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"I'm sorry, "}`,
		`{"type":"response.refusal.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"I cannot help with that."}`,
		`{"type":"response.refusal.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"refusal":"` + refusal + `"}`,
		`{"type":"response.completed","sequence_number":6,"response":` + upstream + `}`,
	}
	in := NewResponsesToChunks("m", false)
	out := NewChunkToMessages("m")
	acc := &anthropicAccumulator{t: t, open: map[int]map[string]any{}, partial: map[int]string{}}
	var acc2 openai.ChatCompletionAccumulator
	for _, ev := range events {
		require.NoError(t, in.Event("", []byte(ev), func(chunk []byte) error {
			var c openai.ChatCompletionChunk
			require.NoError(t, json.Unmarshal(chunk, &c))
			require.True(t, acc2.AddChunk(c))
			return out.Chunk(chunk, acc.add)
		}))
	}
	require.True(t, in.Done())
	complete, err := out.Finish(acc.add)
	require.NoError(t, err)
	require.True(t, complete)
	assert.Equal(t, refusal, acc2.Choices[0].Message.Refusal, "chat, streamed")
	assert.Equal(t, []map[string]any{{"type": "text", "text": refusal}}, acc.Content, "messages, streamed")
	assert.Equal(t, "end_turn", acc.Stop)
}

// A chat client's response_format reaches a Responses-only upstream as
// text.format, so a structured-output client gets the JSON it validates.
func TestChatResponseFormatReachesResponsesAsTextFormat(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{`{"type":"json_schema","json_schema":{"name":"point","description":"A point.","schema":{"type":"object","properties":{"x":{"type":"number"}}},"strict":true}}`,
			`{"type":"json_schema","name":"point","description":"A point.","schema":{"type":"object","properties":{"x":{"type":"number"}}},"strict":true}`},
		{`{"type":"json_schema","json_schema":{"name":"point","schema":{"type":"object"}}}`,
			`{"type":"json_schema","name":"point","schema":{"type":"object"}}`},
		{`{"type":"json_object"}`, `{"type":"json_object"}`},
		{`{"type":"text"}`, `{"type":"text"}`},
	} {
		out, err := OpenAIToResponsesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":`+tc.format+`}`), "gpt-5")
		require.NoError(t, err, tc.format)
		var r struct {
			Text struct {
				Format json.RawMessage `json:"format"`
			} `json:"text"`
		}
		require.NoError(t, json.Unmarshal(out, &r))
		assert.JSONEq(t, tc.want, string(r.Text.Format), tc.format)
	}
	_, err := OpenAIToResponsesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"yaml"}}`), "gpt-5")
	require.ErrorIs(t, err, ErrInvalidRequest)
	assert.Contains(t, err.Error(), "response_format.type")
}

// The Responses API has no stop sequences: a chat request's stop is not
// sent (the gateway stops the answer at them itself), whatever it asks
// for; a stop that is neither a string nor an array of strings is refused.
func TestChatStopIsNotSentToResponses(t *testing.T) {
	for _, stop := range []string{`"END"`, `["\n"]`, `["", "###"]`, `null`, `""`, `[]`, `[""]`} {
		out, err := OpenAIToResponsesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":`+stop+`}`), "gpt-5")
		require.NoError(t, err, stop)
		assert.NotContains(t, string(out), `"stop"`, stop)
	}
	for _, stop := range []string{`5`, `[1]`, `{"a":"b"}`} {
		_, err := OpenAIToResponsesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":`+stop+`}`), "gpt-5")
		var re *RequestError
		require.ErrorAs(t, err, &re, stop)
		assert.Equal(t, "stop", re.Param, stop)
	}
}

// A reasoning summary in several parts (each a paragraph under its own
// bold title, none ending in a separator) reaches a chat client as
// paragraphs, streamed and whole alike, where run together the titles
// would merge into one ("...look.**Checking**").
func TestResponsesReasoningSummaryParts(t *testing.T) {
	summary := func(index int, text string) string {
		b, _ := json.Marshal(map[string]any{"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": index, "delta": text})
		return string(b)
	}
	const want = "**Planning**\n\nI will look.\n\n**Checking**\n\nIt works.\n\n**Answering**\n\nDone."
	events := []string{
		`{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`,
		summary(0, "**Planning**\n\n"), summary(0, "I will look."),
		`{"type":"response.reasoning_summary_part.done","item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"**Planning**\n\nI will look."}}`,
		`{"type":"response.reasoning_summary_part.added","item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}`,
		summary(1, "**Checking**\n\nIt works."),
		`{"type":"response.reasoning_summary_text.delta","item_id":"rs_2","output_index":1,"summary_index":0,"delta":"**Answering**\n\nDone."}`,
		`{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[]}}`,
	}
	tr := NewResponsesToChunks("gpt-5", false)
	var streamed strings.Builder
	for _, e := range events {
		require.NoError(t, tr.Event("", []byte(e), func(c []byte) error {
			var chunk struct {
				Choices []struct {
					Delta struct {
						Reasoning string `json:"reasoning_content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(c, &chunk))
			for _, ch := range chunk.Choices {
				streamed.WriteString(ch.Delta.Reasoning)
			}
			return nil
		}))
	}
	assert.Equal(t, want, streamed.String(), "streamed")

	out, _, err := ResponsesToOpenAIResponse([]byte(`{"id":"resp_1","status":"completed","output":[
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"**Planning**\n\nI will look."},{"type":"summary_text","text":"**Checking**\n\nIt works."}]},
		{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"**Answering**\n\nDone."}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}]}`), "gpt-5")
	require.NoError(t, err)
	var whole struct {
		Choices []struct {
			Message struct {
				Reasoning string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(out, &whole))
	assert.Equal(t, want, whole.Choices[0].Message.Reasoning, "whole")
}

// A reasoning item's raw reasoning (its content's reasoning_text parts, as
// gpt-oss models behind a Responses API send it) reaches a chat client as
// reasoning_content whole as streamed, its parts a blank line apart as a
// summary's are.
func TestResponsesReasoningText(t *testing.T) {
	text := func(item string, index int, delta string) string {
		b, _ := json.Marshal(map[string]any{"type": "response.reasoning_text.delta", "item_id": item, "output_index": 0, "content_index": index, "delta": delta})
		return string(b)
	}
	const want = "The user greets me.\n\nI should greet back.\n\nKeep it short."
	events := []string{
		`{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		text("rs_1", 0, "The user "), text("rs_1", 0, "greets me."), text("rs_1", 1, "I should greet back."),
		text("rs_2", 0, "Keep it short."),
		`{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[]}}`,
	}
	tr := NewResponsesToChunks("gpt-oss-120b", false)
	var streamed strings.Builder
	for _, e := range events {
		require.NoError(t, tr.Event("", []byte(e), func(c []byte) error {
			var chunk struct {
				Choices []struct {
					Delta struct {
						Reasoning string `json:"reasoning_content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(c, &chunk))
			for _, ch := range chunk.Choices {
				streamed.WriteString(ch.Delta.Reasoning)
			}
			return nil
		}))
	}
	assert.Equal(t, want, streamed.String(), "streamed")

	out, _, err := ResponsesToOpenAIResponse([]byte(`{"id":"resp_1","status":"completed","output":[
		{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"The user greets me."},{"type":"reasoning_text","text":"I should greet back."}]},
		{"type":"reasoning","id":"rs_2","summary":[],"content":[{"type":"reasoning_text","text":"Keep it short."}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}]}`), "gpt-oss-120b")
	require.NoError(t, err)
	var whole struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				Reasoning string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(out, &whole))
	assert.Equal(t, want, whole.Choices[0].Message.Reasoning, "whole")
	assert.Equal(t, "Hi", whole.Choices[0].Message.Content)
}

// A function a chat request marks strict stays strict on a Responses
// upstream; one it does not mark is sent not strict, since the Responses
// API would otherwise hold every schema to strict mode and refuse those
// strict mode cannot take.
func TestChatStrictToolsReachResponses(t *testing.T) {
	out, err := OpenAIToResponsesRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[
		{"type":"function","function":{"name":"get_weather","strict":true,"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}},
		{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]}`), "gpt-5")
	require.NoError(t, err)
	var r struct {
		Tools []struct {
			Name   string `json:"name"`
			Strict *bool  `json:"strict"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(out, &r))
	require.Len(t, r.Tools, 2)
	require.NotNil(t, r.Tools[0].Strict)
	require.NotNil(t, r.Tools[1].Strict)
	assert.True(t, *r.Tools[0].Strict, "get_weather")
	assert.False(t, *r.Tools[1].Strict, "search")
}
