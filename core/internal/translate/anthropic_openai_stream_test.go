package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readStream(t testing.TB, path string) []sseEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	events := parseSSE(b)
	require.NotEmpty(t, events)
	return events
}

// TestStreamGolden translates the recorded Anthropic stream and the
// hand-written ones (testdata/stream/*.txt) with include_usage on.
func TestStreamGolden(t *testing.T) {
	files := inputs(t, "testdata/anthropic/*.txt", "testdata/stream/*.txt")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			before := time.Now()
			res, _ := translateStream(readStream(t, files[name]), true)
			chunks := make([]any, len(res.Chunks))
			for i, c := range res.Chunks {
				chunks[i] = normalizeCreated(t, decodeJSON(t, c), before)
			}
			goldenJSON(t, filepath.Join("testdata/golden/stream", name+".json"), map[string]any{
				"chunks": chunks, "done": res.Done, "usage": res.Usage, "error": res.Error,
			})
		})
	}
}

// TestStreamParsesWithOpenAIGo feeds every translated chunk of every
// fixture to the official client's types and accumulator.
func TestStreamParsesWithOpenAIGo(t *testing.T) {
	files := inputs(t, "testdata/anthropic/*.txt", "testdata/stream/*.txt")
	for _, name := range sortedKeys(files) {
		for _, includeUsage := range []bool{true, false} {
			t.Run(name, func(t *testing.T) {
				res, _ := translateStream(readStream(t, files[name]), includeUsage)
				acc := accumulate(t, res.Chunks)
				if res.Done && includeUsage {
					assert.Equal(t, res.Usage.PromptTokens, acc.Usage.PromptTokens)
					assert.Equal(t, res.Usage.CompletionTokens, acc.Usage.CompletionTokens)
					assert.Equal(t, res.Usage.CachedTokens, acc.Usage.PromptTokensDetails.CachedTokens)
				}
				if !includeUsage {
					assert.Zero(t, acc.Usage.TotalTokens)
				}
			})
		}
	}
}

// accumulate parses each chunk with openai-go and accumulates them,
// checking the fields every chunk must carry.
func accumulate(t testing.TB, chunks []json.RawMessage) *openai.ChatCompletionAccumulator {
	t.Helper()
	acc := &openai.ChatCompletionAccumulator{}
	var id string
	for i, raw := range chunks {
		var c openai.ChatCompletionChunk
		require.NoError(t, json.Unmarshal(raw, &c), "chunk %d: %s", i, raw)
		require.True(t, c.JSON.ID.Valid() && c.JSON.Object.Valid() && c.JSON.Created.Valid() && c.JSON.Model.Valid() && c.JSON.Choices.Valid(), "chunk %d lacks a required field: %s", i, raw)
		require.Equal(t, "chat.completion.chunk", string(c.Object))
		require.True(t, strings.HasPrefix(c.ID, "chatcmpl-"), c.ID)
		if id == "" {
			id = c.ID
		}
		require.Equal(t, id, c.ID, "chunk %d changes the id", i)
		require.True(t, acc.AddChunk(c), "accumulator refused chunk %d: %s", i, raw)
	}
	return acc
}

// TestStreamParallelToolCalls checks the indices and arguments of two tool
// calls that follow a text block (Anthropic blocks 1 and 2, OpenAI tool
// calls 0 and 1), through the official accumulator.
func TestStreamParallelToolCalls(t *testing.T) {
	res, err := translateStream(readStream(t, "testdata/stream/parallel_tools.txt"), true)
	require.NoError(t, err)
	require.True(t, res.Done)

	var indices []int64
	for _, raw := range res.Chunks {
		var c openai.ChatCompletionChunk
		require.NoError(t, json.Unmarshal(raw, &c))
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				indices = append(indices, tc.Index)
			}
		}
	}
	assert.Equal(t, []int64{0, 0, 0, 0, 1, 1, 1}, indices, "one start and the non-empty fragments per call")

	acc := accumulate(t, res.Chunks)
	msg := acc.Choices[0].Message
	assert.Equal(t, "Checking both cities.", msg.Content)
	assert.Equal(t, "tool_calls", acc.Choices[0].FinishReason)
	require.Len(t, msg.ToolCalls, 2)
	want := []struct {
		id, name string
		args     map[string]any
	}{
		{"toolu_01Paris", "get_weather", map[string]any{"location": "Paris", "unit": "celsius"}},
		{"toolu_02Tokyo", "get_weather", map[string]any{"location": `東京 "Tokyo"`}},
	}
	for i, w := range want {
		tc := msg.ToolCalls[i]
		assert.Equal(t, w.id, tc.ID)
		assert.Equal(t, "function", string(tc.Type))
		assert.Equal(t, w.name, tc.Function.Name)
		var args map[string]any
		require.NoError(t, json.Unmarshal([]byte(tc.Function.Arguments), &args), tc.Function.Arguments)
		assert.Equal(t, w.args, args)
	}
	assert.Equal(t, Usage{PromptTokens: 472 + 1024, CompletionTokens: 89, TotalTokens: 472 + 1024 + 89, CachedTokens: 1024}, res.Usage)
	assert.Equal(t, int64(472+1024), acc.Usage.PromptTokens)
}

// TestStreamToolWithoutDeltas: a tool with no input gets "{}", one whose
// input came whole in content_block_start gets that input.
func TestStreamToolWithoutDeltas(t *testing.T) {
	res, err := translateStream(readStream(t, "testdata/stream/thinking_tool.txt"), false)
	require.NoError(t, err)
	acc := accumulate(t, res.Chunks)
	msg := acc.Choices[0].Message
	require.Len(t, msg.ToolCalls, 2)
	assert.Equal(t, "get_time", msg.ToolCalls[0].Function.Name)
	assert.Equal(t, "{}", msg.ToolCalls[0].Function.Arguments)
	assert.Equal(t, `{"city":"Paris"}`, msg.ToolCalls[1].Function.Arguments)
	assert.Equal(t, Usage{PromptTokens: 380, CompletionTokens: 57, TotalTokens: 437, CacheCreationTokens: 300}, res.Usage)
	assert.Equal(t, "The user wants the time.\nget_time takes no input.", streamedReasoning(t, res.Chunks))
}

// TestStreamMatchesRecordedOpenAIShape compares the fields of our chunks
// with OpenAI's recorded streams: chat-streaming-detailed-usage (with
// include_usage) and chat-streaming (without).
func TestStreamMatchesRecordedOpenAIShape(t *testing.T) {
	for recorded, includeUsage := range map[string]bool{
		"chat-streaming-detailed-usage.response.txt": true,
		"chat-streaming.response.txt":                false,
	} {
		t.Run(recorded, func(t *testing.T) {
			want := map[string]bool{}
			for _, ev := range readStream(t, filepath.Join("testdata/openai", recorded)) {
				if string(ev.data) == "[DONE]" {
					continue
				}
				for k := range keyPaths(decodeJSON(t, ev.data), "") {
					want[k] = true
				}
			}
			delete(want, "service_tier")
			delete(want, "obfuscation")
			res, err := translateStream(readStream(t, "testdata/anthropic/messages_stream.txt"), includeUsage)
			require.NoError(t, err)
			got := map[string]bool{}
			for _, c := range res.Chunks {
				for k := range keyPaths(decodeJSON(t, c), "") {
					got[k] = true
				}
			}
			if diff := cmp.Diff(sortedSet(want), sortedSet(got)); diff != "" {
				t.Errorf("fields differ from the recorded OpenAI stream (-recorded +ours):\n%s", diff)
			}
		})
	}
}

// TestStreamWithoutUsage: without include_usage the chunks are the same
// minus the usage chunk and the "usage":null fields.
func TestStreamWithoutUsage(t *testing.T) {
	for _, file := range []string{"testdata/anthropic/messages_stream.txt", "testdata/stream/parallel_tools.txt"} {
		events := readStream(t, file)
		with, err := translateStream(events, true)
		require.NoError(t, err)
		without, err := translateStream(events, false)
		require.NoError(t, err)
		require.Len(t, without.Chunks, len(with.Chunks)-1)
		for i, c := range without.Chunks {
			assert.NotContains(t, string(c), `"usage"`)
			stripped := bytes.Replace(with.Chunks[i], []byte(`,"usage":null`), nil, 1)
			assert.JSONEq(t, string(stripped), string(c))
		}
		last := decodeJSON(t, with.Chunks[len(with.Chunks)-1]).(map[string]any)
		assert.Equal(t, []any{}, last["choices"])
		assert.NotNil(t, last["usage"])
		assert.Equal(t, with.Usage, without.Usage)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	res, err := translateStream(readStream(t, "testdata/stream/error_midstream.txt"), true)
	var ae *AnthropicError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "overloaded_error", ae.Type)
	assert.Equal(t, 529, ae.Status())
	assert.JSONEq(t, `{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`, string(ae.OpenAIBody()))
	assert.False(t, res.Done)
	assert.Len(t, res.Chunks, 2, "role chunk and the partial text, no finish")
}

// An error event with no event line and no type, in OpenAI's shape (some
// compatible upstreams send one), is the error it reports, its message
// kept, before message_start and after.
func TestStreamUnnamedOpenAIShapedError(t *testing.T) {
	const start = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`
	failed := []byte(`{"error":{"message":"bad thing","code":"1301"}}`)
	for _, before := range [][]string{nil, {start}} {
		tr := NewStreamTranslator("m", true)
		emit := func([]byte) error { return nil }
		for _, ev := range before {
			require.NoError(t, tr.Event("", []byte(ev), emit))
		}
		err := tr.Event("", failed, emit)
		var ae *AnthropicError
		require.ErrorAs(t, err, &ae, "after %d events", len(before))
		assert.Equal(t, "bad thing", ae.Message)
		assert.False(t, tr.Done())
	}
}

func TestStreamCutIsNotDone(t *testing.T) {
	res, err := translateStream(readStream(t, "testdata/stream/cut.txt"), true)
	require.NoError(t, err)
	assert.False(t, res.Done)
	for _, c := range res.Chunks {
		var chunk openai.ChatCompletionChunk
		require.NoError(t, json.Unmarshal(c, &chunk))
		for _, ch := range chunk.Choices {
			assert.Empty(t, ch.FinishReason, "a cut stream must not look finished")
		}
		assert.NotEmpty(t, chunk.Choices, "no usage chunk before the end")
	}
	assert.Equal(t, int64(12), res.Usage.PromptTokens)
}

func TestStreamMalformed(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":1}}}`
	for _, tc := range []struct {
		name   string
		events []sseEvent
	}{
		{"delta before message_start", []sseEvent{{"content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`)}}},
		{"not JSON", []sseEvent{{"message_start", []byte(`{"type":`)}}},
		{"second message_start", []sseEvent{{"message_start", []byte(start)}, {"message_start", []byte(start)}}},
		{"tool_use without name", []sseEvent{{"message_start", []byte(start)}, {"content_block_start", []byte(`{"index":0,"content_block":{"type":"tool_use","id":"t"}}`)}}},
		{"input_json_delta without a block", []sseEvent{{"message_start", []byte(start)}, {"content_block_delta", []byte(`{"index":3,"delta":{"type":"input_json_delta","partial_json":"{"}}`)}}},
		{"input_json_delta in a text block", []sseEvent{{"message_start", []byte(start)}, {"content_block_start", []byte(`{"index":0,"content_block":{"type":"text","text":""}}`)}, {"content_block_delta", []byte(`{"index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`)}}},
		{"text_delta in a tool block", []sseEvent{{"message_start", []byte(start)}, {"content_block_start", []byte(`{"index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`)}, {"content_block_delta", []byte(`{"index":0,"delta":{"type":"text_delta","text":"x"}}`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := translateStream(tc.events, true)
			require.ErrorIs(t, err, ErrMalformedUpstream)
		})
	}
}

func TestStreamIgnores(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":1}}}`
	res, err := translateStream([]sseEvent{
		{"ping", []byte(`not even json`)},
		{"message_start", []byte(start)},
		{"future_event", []byte(`{"type":"future_event"}`)},
		{"content_block_start", []byte(`{"index":0,"content_block":{"type":"server_tool_use","id":"srv","name":"web_search","input":{}}}`)},
		{"content_block_delta", []byte(`{"index":0,"delta":{"type":"input_json_delta","partial_json":"{\"q\":1}"}}`)},
		{"content_block_stop", []byte(`{"index":0}`)},
		{"message_stop", []byte(`{"type":"message_stop"}`)},
		{"content_block_delta", []byte(`garbage after the end`)},
	}, false)
	require.NoError(t, err)
	assert.True(t, res.Done)
	require.Len(t, res.Chunks, 2, "role and finish only")
	assert.Contains(t, string(res.Chunks[1]), `"finish_reason":"stop"`, "message_stop without message_delta still finishes")
}

func TestStreamEmitErrorStops(t *testing.T) {
	tr := NewStreamTranslator("m", true)
	boom := errors.New("client gone")
	err := tr.Event("message_start", []byte(`{"type":"message_start","message":{"id":"msg_1"}}`), func([]byte) error { return boom })
	require.ErrorIs(t, err, boom)
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" backslash \\", "ctl \x00\x01\x1f\t\n\r\b\f", "<html> & \u2028\u2029", "日本語 🎉", "bad \xff\xfe utf8", "\x7f"} {
		got := appendString(nil, s)
		require.True(t, json.Valid(got), "%q -> %s", s, got)
		var back string
		require.NoError(t, json.Unmarshal(got, &back))
		std, err := json.Marshal(s)
		require.NoError(t, err)
		var want string
		require.NoError(t, json.Unmarshal(std, &want))
		assert.Equal(t, want, back, "decodes as encoding/json's encoding does")
	}
	assert.Equal(t, `"a<b>&c"`, string(appendString(nil, "a<b>&c")))
}

// An answer with several thinking blocks (interleaved thinking around a
// tool call or a text, a redacted block between) reaches a chat client as
// reasoning_content whose blocks are a blank line apart, streamed and whole
// alike, where run together their words merged ("...the file.Now I
// will..."). A Responses client gets the blocks as reasoning items of
// their own when streamed, each without the blank line, and as one joined
// as the chat answer's when whole.
func TestThinkingBlocksBlankLineApart(t *testing.T) {
	const want = "I will read the file.\n\nNow I will answer.\n\nDone thinking."
	blocks := []string{
		`{"type":"thinking","thinking":"I will read the file.","signature":"sig1"}`,
		`{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a"}}`,
		`{"type":"redacted_thinking","data":"xyz"}`,
		`{"type":"thinking","thinking":"","signature":"sig2"}`,
		`{"type":"thinking","thinking":"Now I will answer.","signature":"sig3"}`,
		`{"type":"text","text":"Here it is."}`,
		`{"type":"thinking","thinking":"Done thinking.","signature":"sig4"}`,
	}
	var events []sseEvent
	add := func(name, data string) { events = append(events, sseEvent{name: name, data: []byte(data)}) }
	add("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":5,"output_tokens":1}}}`)
	for i, b := range blocks {
		var blk map[string]any
		require.NoError(t, json.Unmarshal([]byte(b), &blk))
		idx := strconv.Itoa(i)
		switch blk["type"] {
		case "thinking": // its text in deltas, the first word alone
			text := blk["thinking"].(string)
			add("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
			if first, rest, ok := strings.Cut(text, " "); ok {
				for _, part := range []string{first + " ", rest} {
					d, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": part}})
					add("content_block_delta", string(d))
				}
			}
		default:
			add("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":`+b+`}`)
		}
		add("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`)
	}
	add("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}`)
	add("message_stop", `{"type":"message_stop"}`)

	res, err := translateStream(events, false)
	require.NoError(t, err)
	assert.Equal(t, want, streamedReasoning(t, res.Chunks), "streamed")

	message := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[` + strings.Join(blocks, ",") +
		`],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":20}}`
	out, _, err := AnthropicToOpenAIResponse([]byte(message), "m")
	require.NoError(t, err)
	var whole struct {
		Choices []struct {
			Message struct {
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(out, &whole))
	assert.Equal(t, want, whole.Choices[0].Message.ReasoningContent, "whole")

	// Responses, streamed: the chunks' reasoning in items of its own.
	tr := Echo{}.Chunks("m")
	var summaries []string
	collect := func(name string, data []byte) error {
		if name == "response.reasoning_summary_text.done" {
			var ev struct{ Text string }
			require.NoError(t, json.Unmarshal(data, &ev))
			summaries = append(summaries, ev.Text)
		}
		return nil
	}
	for _, chunk := range res.Chunks {
		require.NoError(t, tr.Chunk(chunk, collect))
	}
	_, err = tr.Finish(collect)
	require.NoError(t, err)
	assert.Equal(t, []string{"I will read the file.", "Now I will answer.", "Done thinking."}, summaries, "Responses, streamed")

	// Responses, whole: one reasoning item, the chat answer's.
	resp, _, err := Echo{}.Response(out, "m")
	require.NoError(t, err)
	var r struct {
		Output []struct {
			Type    string
			Summary []struct{ Text string }
		}
	}
	require.NoError(t, json.Unmarshal(resp, &r))
	require.NotEmpty(t, r.Output)
	require.Equal(t, "reasoning", r.Output[0].Type)
	require.Len(t, r.Output[0].Summary, 1)
	assert.Equal(t, want, r.Output[0].Summary[0].Text, "Responses, whole")
}

// streamedReasoning is the reasoning_content of chunks, joined.
func streamedReasoning(t *testing.T, chunks []json.RawMessage) string {
	t.Helper()
	var out strings.Builder
	for _, raw := range chunks {
		var c struct {
			Choices []struct {
				Delta struct {
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(raw, &c))
		if len(c.Choices) > 0 {
			out.WriteString(c.Choices[0].Delta.ReasoningContent)
		}
	}
	return out.String()
}
