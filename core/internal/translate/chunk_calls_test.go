package translate

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tool calls of Chat Completions answers, streamed and whole, as Messages
// tool_use blocks and Responses function_call items: which delta belongs to
// which call, and the stop reason of an answer that calls tools.

type toolCall struct{ ID, Name, Args string }

// toolsChunk is a chunk whose delta carries calls (a JSON array).
func toolsChunk(calls string) string {
	return `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":` + calls + `}}]}`
}

func finishChunk(reason string) string {
	return `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

var toolCallStreams = []struct {
	name   string
	chunks []string
	calls  []toolCall
	stop   string // the Messages stop_reason
}{{
	name: "no index, one call per chunk, finish stop (Gemini)",
	chunks: []string{
		toolsChunk(`[{"id":"fc-1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`),
		toolsChunk(`[{"id":"fc-2","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]`),
		finishChunk("stop"),
	},
	calls: []toolCall{{"fc-1", "get_weather", `{"city":"Paris"}`}, {"fc-2", "get_time", `{"tz":"UTC"}`}},
	stop:  "tool_use",
}, {
	name: "no index, two calls in one chunk",
	chunks: []string{
		toolsChunk(`[{"id":"fc-1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
			`{"id":"fc-2","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]`),
		finishChunk("tool_calls"),
	},
	calls: []toolCall{{"fc-1", "get_weather", `{"city":"Paris"}`}, {"fc-2", "get_time", `{"tz":"UTC"}`}},
	stop:  "tool_use",
}, {
	name: "no index, a call's arguments split, then the next call",
	chunks: []string{
		toolsChunk(`[{"id":"fc-1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]`),
		toolsChunk(`[{"function":{"arguments":"\"Paris\"}"}}]`),
		toolsChunk(`[{"id":"fc-2","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]`),
		finishChunk("stop"),
	},
	calls: []toolCall{{"fc-1", "get_weather", `{"city":"Paris"}`}, {"fc-2", "get_time", `{"tz":"UTC"}`}},
	stop:  "tool_use",
}, {
	name: "explicit indexes, arguments split, id on the first delta only (OpenAI)",
	chunks: []string{
		toolsChunk(`[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]`),
		toolsChunk(`[{"index":0,"function":{"arguments":"{\"city\":"}}]`),
		toolsChunk(`[{"index":0,"function":{"arguments":"\"Paris\"}"}}]`),
		toolsChunk(`[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]`),
		toolsChunk(`[{"index":1,"function":{"arguments":"{\"tz\":\"UTC\"}"}}]`),
		finishChunk("tool_calls"),
	},
	calls: []toolCall{{"call_a", "get_weather", `{"city":"Paris"}`}, {"call_b", "get_time", `{"tz":"UTC"}`}},
	stop:  "tool_use",
}, {
	name: "the id repeated on every delta of one call",
	chunks: []string{
		toolsChunk(`[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]`),
		toolsChunk(`[{"index":0,"id":"call_a","function":{"arguments":"\"Paris\"}"}}]`),
		finishChunk("tool_calls"),
	},
	calls: []toolCall{{"call_a", "get_weather", `{"city":"Paris"}`}},
	stop:  "tool_use",
}, {
	name: "forced tool_choice: one call, finish stop",
	chunks: []string{
		toolsChunk(`[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`),
		finishChunk("stop"),
	},
	calls: []toolCall{{"call_a", "get_weather", `{"city":"Paris"}`}},
	stop:  "tool_use",
}, {
	name:   "text only, finish stop",
	chunks: []string{`{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}`, finishChunk("stop")},
	stop:   "end_turn",
}, {
	name: "a call cut by length",
	chunks: []string{
		toolsChunk(`[{"id":"fc-1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]`),
		finishChunk("length"),
	},
	calls: []toolCall{{"fc-1", "get_weather", `{}`}},
	stop:  "max_tokens",
}}

func TestChunkToMessagesToolCalls(t *testing.T) {
	for _, tc := range toolCallStreams {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewChunkToMessages("m")
			acc := &anthropicAccumulator{t: t, open: map[int]map[string]any{}, partial: map[int]string{}}
			for _, c := range tc.chunks {
				require.NoError(t, tr.Chunk([]byte(c), acc.add))
			}
			complete, err := tr.Finish(acc.add)
			require.NoError(t, err)
			require.True(t, complete)
			var calls []toolCall
			for _, b := range acc.Content {
				if b["type"] != "tool_use" {
					continue
				}
				args, err := json.Marshal(b["input"])
				require.NoError(t, err)
				calls = append(calls, toolCall{b["id"].(string), b["name"].(string), string(args)})
			}
			if diff := cmp.Diff(tc.calls, calls); diff != "" {
				t.Errorf("tool_use blocks (-want +got):\n%s", diff)
			}
			assert.Equal(t, tc.stop, acc.Stop)
		})
	}
}

func TestChunkToResponsesToolCalls(t *testing.T) {
	for _, tc := range toolCallStreams {
		t.Run(tc.name, func(t *testing.T) {
			tr := Echo{}.Chunks("m")
			var final *responses.Response
			args := map[string]string{} // argument deltas by item
			emit := func(name string, data []byte) error {
				var ev responses.ResponseStreamEventUnion
				require.NoError(t, json.Unmarshal(data, &ev))
				switch name {
				case "response.function_call_arguments.delta":
					args[ev.ItemID] += ev.Delta
				case "response.function_call_arguments.done":
					assert.Equal(t, ev.Arguments, args[ev.ItemID], "deltas add up to the call's arguments")
				case "response.completed", "response.incomplete":
					r := ev.AsResponseCompleted().Response
					final = &r
				}
				return nil
			}
			for _, c := range tc.chunks {
				require.NoError(t, tr.Chunk([]byte(c), emit))
			}
			complete, err := tr.Finish(emit)
			require.NoError(t, err)
			require.True(t, complete)
			require.NotNil(t, final)
			checkFunctionCalls(t, *final, tc.calls, tc.stop)
		})
	}
}

// A whole answer's calls are a list, one element each, so they never merge;
// the stop reason follows them as in a stream.
func TestWholeAnswerToolCalls(t *testing.T) {
	answer := func(finish, calls string) []byte {
		return []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":` +
			calls + `},"finish_reason":"` + finish + `"}]}`)
	}
	two := `[{"id":"fc-1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
		`{"id":"fc-2","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]`
	twoCalls := []toolCall{{"fc-1", "get_weather", `{"city":"Paris"}`}, {"fc-2", "get_time", `{"tz":"UTC"}`}}
	for _, tc := range []struct {
		name  string
		body  []byte
		calls []toolCall
		stop  string
	}{
		{"two calls without index, finish stop (Gemini)", answer("stop", two), twoCalls, "tool_use"},
		{"two calls, finish tool_calls", answer("tool_calls", two), twoCalls, "tool_use"},
		{"no calls, finish stop", answer("stop", `null`), nil, "end_turn"},
		{"no calls, finish length", answer("length", `[]`), nil, "max_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := OpenAIToAnthropicResponse(tc.body, "m")
			require.NoError(t, err)
			var msg struct {
				Content []struct {
					Type, ID, Name string
					Input          json.RawMessage
				}
				StopReason string `json:"stop_reason"`
			}
			require.NoError(t, json.Unmarshal(got, &msg))
			var calls []toolCall
			for _, b := range msg.Content {
				if b.Type == "tool_use" {
					calls = append(calls, toolCall{b.ID, b.Name, string(b.Input)})
				}
			}
			if diff := cmp.Diff(tc.calls, calls); diff != "" {
				t.Errorf("tool_use blocks (-want +got):\n%s", diff)
			}
			assert.Equal(t, tc.stop, msg.StopReason)

			got, _, err = Echo{}.Response(tc.body, "m")
			require.NoError(t, err)
			var r responses.Response
			require.NoError(t, json.Unmarshal(got, &r))
			checkFunctionCalls(t, r, tc.calls, tc.stop)
		})
	}
}

// checkFunctionCalls checks a response's function_call items against want,
// and that a response calling tools is completed as any other (incomplete
// only when cut at max_tokens).
func checkFunctionCalls(t *testing.T, r responses.Response, want []toolCall, stop string) {
	t.Helper()
	var calls []toolCall
	for _, it := range r.Output {
		if it.Type == "function_call" {
			fc := it.AsFunctionCall()
			calls = append(calls, toolCall{fc.CallID, fc.Name, fc.Arguments})
		}
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("function_call items (-want +got):\n%s", diff)
	}
	status := responses.ResponseStatusCompleted
	if stop == "max_tokens" {
		status = responses.ResponseStatusIncomplete
	}
	assert.Equal(t, status, r.Status)
}
