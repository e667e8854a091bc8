package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Golden tests of the Responses-to-Chat-Completions pair, and of the
// Responses-to-Messages pair composed through it.

func TestResponsesRequestGolden(t *testing.T) {
	files := inputs(t, "testdata/responses/request/*.json")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(files[name])
			require.NoError(t, err)
			got, err := ResponsesToOpenAIRequest(body, "gpt-5", ChatOptions{})
			golden := filepath.Join("testdata/golden/responses/request", name+".json")
			if strings.HasPrefix(name, "error_") {
				require.ErrorIs(t, err, ErrInvalidRequest)
				goldenJSON(t, golden, map[string]any{"error": err.Error()})
				return
			}
			require.NoError(t, err)
			assertChatInvariants(t, got)
			anth, err := OpenAIToAnthropicRequest(got, "claude-sonnet-4-6", AnthropicOptions{})
			require.NoError(t, err, "the chat request goes on to Anthropic")
			assertAnthropicInvariants(t, anth.Body)
			goldenJSON(t, golden, map[string]any{"chat": decodeJSON(t, got), "anthropic": decodeJSON(t, anth.Body)})
		})
	}
}

// normalizeResponse blanks the minted ids and times of a response.
func normalizeResponse(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for _, k := range []string{"id", "created_at", "item_id"} {
		if _, ok := m[k]; ok {
			m[k] = k
		}
	}
	for k, x := range m {
		switch x := x.(type) {
		case map[string]any:
			m[k] = normalizeResponse(x)
		case []any:
			for i := range x {
				x[i] = normalizeResponse(x[i])
			}
		}
	}
	return m
}

func TestResponsesResponseGolden(t *testing.T) {
	files := inputs(t, "testdata/messages/response/*.json", "testdata/openai/*.response.json")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(files[name])
			require.NoError(t, err)
			got, u, err := Echo{}.Response(body, "gpt-5")
			require.NoError(t, err)
			var r responses.Response
			require.NoError(t, json.Unmarshal(got, &r), "openai-go reads it")
			assert.Equal(t, "response", string(r.Object))
			goldenJSON(t, filepath.Join("testdata/golden/responses/response", name+".json"),
				map[string]any{"response": normalizeResponse(decodeJSON(t, got)), "usage": u})
		})
	}
}

// Every translated stream parses event by event with openai-go's types and
// its deltas add up to the final response.
func TestResponsesStreamGolden(t *testing.T) {
	files := inputs(t, "testdata/messages/stream/*.txt", "testdata/openai/*.response.txt")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(files[name])
			require.NoError(t, err)
			tr := Echo{}.Chunks("gpt-5")
			var events []any
			var text, args string
			var final *responses.Response
			seq := int64(0)
			emit := func(name string, data []byte) error {
				var ev responses.ResponseStreamEventUnion
				require.NoError(t, json.Unmarshal(data, &ev))
				require.Equal(t, name, ev.Type)
				require.Equal(t, seq, ev.SequenceNumber, "sequence numbers count up")
				seq++
				switch name {
				case "response.output_text.delta":
					text += ev.Delta
				case "response.function_call_arguments.delta":
					args += ev.Delta
				case "response.completed", "response.incomplete":
					r := ev.AsResponseCompleted().Response
					final = &r
				}
				events = append(events, map[string]any{"event": name, "data": normalizeResponse(decodeJSON(t, data))})
				return nil
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
			require.NotNil(t, final)
			assert.Equal(t, text, final.OutputText())
			var calls string
			for _, it := range final.Output {
				if it.Type == "function_call" {
					calls += it.AsFunctionCall().Arguments
				}
			}
			assert.Equal(t, args, calls, "argument deltas add up to the calls")
			goldenJSON(t, filepath.Join("testdata/golden/responses/stream", name+".json"), map[string]any{"events": events})
		})
	}
}

// A Messages stream from Anthropic, through both translators, is a whole
// Responses stream.
func TestResponsesFromAnthropicStream(t *testing.T) {
	raw, err := os.ReadFile("testdata/anthropic/messages_stream.txt")
	require.NoError(t, err)
	in, out := NewStreamTranslator("claude", true), Echo{}.Chunks("claude")
	var names []string
	emit := func(name string, _ []byte) error { names = append(names, name); return nil }
	for _, ev := range parseSSE(raw) {
		require.NoError(t, in.Event(ev.name, ev.data, func(c []byte) error { return out.Chunk(c, emit) }))
	}
	require.True(t, in.Done())
	complete, err := out.Finish(emit)
	require.NoError(t, err)
	assert.True(t, complete)
	assert.Equal(t, "response.completed", names[len(names)-1])
	assert.Equal(t, int64(5), out.Usage().CompletionTokens)
}

// FuzzResponsesToOpenAIRequest: any client body translates into a valid
// chat request or fails with a RequestError; it never panics.
func FuzzResponsesToOpenAIRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/responses/request/*.json")
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ResponsesToOpenAIRequest(body, "m", ChatOptions{})
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidRequest)
			return
		}
		require.True(t, json.Valid(out))
	})
}

// What a Responses request says of its tools, its output schema and its
// images reaches a chat upstream where Chat Completions has the same
// field: a function's strict, a json_schema's description, an image's
// detail (in a message and in a function call's output).
func TestResponsesRequestKeepsStrictDescriptionAndDetail(t *testing.T) {
	body := `{"model":"m","input":[
		{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://x/a.png","detail":"low"}]},
		{"type":"function_call","call_id":"c1","name":"shot","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"https://x/b.png","detail":"high"}]}],
		"tools":[{"type":"function","name":"shot","parameters":{"type":"object","properties":{},"additionalProperties":false},"strict":true},
			{"type":"function","name":"loose","parameters":{"type":"object"}}],
		"text":{"format":{"type":"json_schema","name":"answer","description":"The answer.","schema":{"type":"object"},"strict":true}}}`
	got, err := ResponsesToOpenAIRequest([]byte(body), "gpt-4.1", ChatOptions{ToolResultImages: true})
	require.NoError(t, err)
	var chat struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function map[string]any `json:"function"`
		} `json:"tools"`
		ResponseFormat struct {
			JSONSchema map[string]any `json:"json_schema"`
		} `json:"response_format"`
	}
	require.NoError(t, json.Unmarshal(got, &chat))
	require.Len(t, chat.Tools, 2)
	assert.Equal(t, true, chat.Tools[0].Function["strict"], "a strict function stays strict")
	assert.NotContains(t, chat.Tools[1].Function, "strict", "a function that says nothing is left to the upstream's default")
	assert.Equal(t, "The answer.", chat.ResponseFormat.JSONSchema["description"])
	var images []string
	for _, m := range chat.Messages {
		var parts []struct {
			ImageURL *struct {
				URL    string `json:"url"`
				Detail string `json:"detail"`
			} `json:"image_url"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			if p.ImageURL != nil {
				images = append(images, p.ImageURL.URL+" "+p.ImageURL.Detail)
			}
		}
	}
	assert.Equal(t, []string{"https://x/a.png low", "https://x/b.png high"}, images)
}
