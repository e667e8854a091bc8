package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/openai/openai-go/v3"
)

func addSeeds(f *testing.F, patterns ...string) {
	f.Helper()
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzOpenAIToAnthropicRequest: any body either translates into a request
// Anthropic would accept the shape of, or fails with a RequestError.
func FuzzOpenAIToAnthropicRequest(f *testing.F) {
	addSeeds(f, "testdata/openai/*.request.json", "testdata/request/*.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := OpenAIToAnthropicRequest(body, "claude", AnthropicOptions{})
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error not marked invalid request: %v", err)
			}
			return
		}
		if !json.Valid(got.Body) {
			t.Fatalf("invalid JSON: %s", got.Body)
		}
		assertAnthropicInvariantsFuzz(t, got.Body)
	})
}

// assertAnthropicInvariantsFuzz is assertAnthropicInvariants minus the
// tool pairing, which depends on what the client sent.
func assertAnthropicInvariantsFuzz(t *testing.T, body []byte) {
	var req struct {
		MaxTokens int64 `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if req.MaxTokens < 1 || len(req.Messages) == 0 {
		t.Fatalf("bad max_tokens or no messages: %s", body)
	}
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			t.Fatalf("message %d has role %q: %s", i, m.Role, body)
		}
		c := bytes.TrimSpace(m.Content)
		if len(c) == 0 || string(c) == `""` || string(c) == "[]" || string(c) == "null" {
			t.Fatalf("message %d is empty: %s", i, body)
		}
	}
}

// FuzzAnthropicToOpenAIResponse: any body either becomes a chat.completion
// the official client parses, or fails with a typed error.
func FuzzAnthropicToOpenAIResponse(f *testing.F) {
	addSeeds(f, "testdata/anthropic/*.json", "testdata/response/*.json")
	f.Fuzz(func(t *testing.T, body []byte) {
		got, usage, err := AnthropicToOpenAIResponse(body, "m")
		if err != nil {
			var ae *AnthropicError
			if !errors.As(err, &ae) && !errors.Is(err, ErrMalformedUpstream) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		var cc openai.ChatCompletion
		if err := json.Unmarshal(got, &cc); err != nil || !json.Valid(got) {
			t.Fatalf("%v: %s", err, got)
		}
		if len(cc.Choices) != 1 || usage.PromptTokens < 0 || usage.CompletionTokens < 0 || usage.TotalTokens < usage.PromptTokens {
			t.Fatalf("bad completion: %s", got)
		}
		for _, tc := range cc.Choices[0].Message.ToolCalls {
			if !json.Valid([]byte(tc.Function.Arguments)) {
				t.Fatalf("tool arguments are not JSON: %s", got)
			}
		}
	})
}

// FuzzStreamTranslator: any event sequence (an SSE text) yields chunks the
// official client parses and accumulates, all with one id, or a typed
// error; a clean end closes every tool call with arguments that parse.
func FuzzStreamTranslator(f *testing.F) {
	addSeeds(f, "testdata/anthropic/*.txt", "testdata/stream/*.txt")
	f.Fuzz(func(t *testing.T, stream []byte) {
		res, err := translateStream(parseSSE(stream), true)
		if err != nil {
			var ae *AnthropicError
			if !errors.As(err, &ae) && !errors.Is(err, ErrMalformedUpstream) {
				t.Fatalf("untyped error: %v", err)
			}
		}
		acc := &openai.ChatCompletionAccumulator{}
		var id string
		for i, raw := range res.Chunks {
			var c openai.ChatCompletionChunk
			if err := json.Unmarshal(raw, &c); err != nil || !json.Valid(raw) {
				t.Fatalf("chunk %d: %v: %s", i, err, raw)
			}
			if id == "" {
				id = c.ID
			}
			if c.ID != id || c.Object != "chat.completion.chunk" {
				t.Fatalf("chunk %d: id or object changed: %s", i, raw)
			}
			if !acc.AddChunk(c) {
				t.Fatalf("accumulator refused chunk %d: %s", i, raw)
			}
		}
		if res.Done && len(acc.Choices) > 0 {
			for _, tc := range acc.Choices[0].Message.ToolCalls {
				if tc.Function.Arguments == "" {
					t.Fatalf("tool call %s ended without arguments", tc.ID)
				}
			}
		}
		if u := res.Usage; u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < u.PromptTokens {
			t.Fatalf("bad usage %+v", u)
		}
	})
}

// A content_block_delta and a content_block_stop are the bytes emitJSON
// wrote for them from a map, for any text.
func FuzzDeltaAsEmitJSON(f *testing.F) {
	for _, s := range []string{"", "hi", `"quoted" \ back`, "line\nbreak\ttab\r\x01", "<&>", "\u2028\u2029", "\xff\xfe", "é漢字🙂"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, text string, index int) {
		if index < 0 {
			index = -index
		}
		var got, want []byte
		keep := func(dst *[]byte) Emit {
			return func(_ string, data []byte) error { *dst = append([]byte(nil), data...); return nil }
		}
		for _, d := range []struct{ kind, field string }{{"text_delta", "text"}, {"thinking_delta", "thinking"}, {"input_json_delta", "partial_json"}} {
			tr := &ChunkToMessages{index: index, kind: "text"}
			if err := tr.delta(d.kind, d.field, text, keep(&got)); err != nil {
				t.Fatal(err)
			}
			if err := emitJSON(keep(&want), "content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": d.kind, d.field: text}}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%q: %s, want %s", text, got, want)
			}
		}
		tr := &ChunkToMessages{index: index, kind: "text"}
		if err := tr.closeBlock(keep(&got)); err != nil {
			t.Fatal(err)
		}
		if err := emitJSON(keep(&want), "content_block_stop", map[string]any{"index": index}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("stop: %s, want %s", got, want)
		}
	})
}

// A chunk read in place is the chunk json.Unmarshal reads, whenever the
// reader claims it (it hands json.Unmarshal what it is not sure of).
func FuzzChunkReadAsUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
		`{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
		`{"id":"c\u00e9","choices":[{"delta":{"reasoning_content":"think\n\"x\""}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
		`{"choices":[null,{"delta":null,"finish_reason":null}]}`, `{"choices":null,"id":null}`, `{"error":{"message":"x"}}`,
		`{"ID":"x"}`, `{"id":"a","id":"b"}`, `{"choiceſ":[]}`, `{"choices":[{"Delta":{"content":"x"}}]}`, `{"id":5}`,
		`{"choices":[{"delta":{"content":5}}]}`, `{"choices":"x"}`, `[]`, `{"id":"\xff"}`, `{"choices":[{"delta":{"reasoning":"r","content":null}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var got chatChunk
		if !got.read(data) {
			return
		}
		var want chatChunk
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q: read, but json.Unmarshal fails: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: read %+v, json.Unmarshal %+v", data, got, want)
		}
	})
}
