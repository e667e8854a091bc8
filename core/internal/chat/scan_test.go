package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/translate"
	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// decodedFacts is what inspect reported when it decoded the whole chunk
// with encoding/json, the usage read as the translated routes read it
// (translate.ChatUsage): the reference the raw reader must agree with.
func decodedFacts(data []byte) chunkFacts {
	var f chunkFacts
	var c struct {
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *translate.ChatUsage `json:"usage"`
		Error json.RawMessage      `json:"error"`
	}
	if json.Unmarshal(data, &c) != nil {
		return f
	}
	f.usage = (*usageJSON)(c.Usage)
	f.usageOnly = c.Usage != nil && len(c.Choices) == 0
	f.err = len(c.Error) > 0 && string(c.Error) != "null"
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			f.finished = true
		}
	}
	return f
}

// decodedUsage is the usage chatOpenAI.whole read when it decoded the whole
// answer, as the translated routes read it.
func decodedUsage(raw []byte) Usage {
	var body struct {
		Usage *translate.ChatUsage `json:"usage"`
	}
	_ = json.Unmarshal(raw, &body)
	return (*usageJSON)(body.Usage).usage()
}

var chunkSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi \"there\" {["},"finish_reason":null}],"usage":null}`,
	`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
	`{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}}`,
	`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
	`{"error":{"message":"overloaded","type":"server_error"}}`,
	` { "choices" : [ null , {"finish_reason" : ""} ] , "usage" : { "total_tokens" : 9 } } `,
	`{"choices":"no","usage":{"prompt_tokens":1}}`,
	`{"choices":[{"finish_reason":7}],"usage":null}`,
	`{"usage":{"prompt_tokens":"12"},"choices":[]}`,
	`{"Usage":{"prompt_tokens":4},"CHOICES":[{"Finish_Reason":"stop"}]}`,
	`{"us\u0061ge":{"prompt_tokens":4},"choices":[]}`,
	`[{"usage":{"prompt_tokens":4}}]`,
	`"usage"`,
	`{"error":null,"choices":[{"finish_reason":null}]}`,
	`{"id":"x\\","finish_reason":"stop","choices":[[]]}`,
	`{"usage":{"prompt_tokens":1.5,"total_tokens":3},"choices":[]}`,
	`{"usage":{"prompt_tokens_details":5,"total_tokens":3,"completion_tokens_details":{"reasoning_tokens":null}}}`,
	`{"usage":{"prompt_tokens":-0,"completion_tokens":99999999999999999999,"PROMPT_TOKENS_DETAILS":{"Cached_Tokens":2}}}`,
	`{"usage":[1],"choices":[{"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3.0,"completion_tokens":1.0,"total_tokens":4.0}}`,
	`{"usage":{"prompt_tokens":3e1,"completion_tokens":"2","total_tokens":-2.0E+0,"prompt_tokens_details":{"cached_tokens":1e0}},"choices":[]}`,
	`{"usage":{"prompt_tokens":true,"completion_tokens":{},"total_tokens":9.2233720368547758e18,"completion_tokens_details":{"reasoning_tokens":[1]}},"choices":[{"finish_reason":"length"}]}`,
	`{"usage":{"prompt_tokens":2,"prompt_tokens_details":[3],"completion_tokens_details":"x"},"choices":[{"finish_reason":"stop"}]}`,
	`{"usage":"4","choices":[{"finish_reason":"stop"}]}`,
}

func TestInspectAgreesWithDecoding(t *testing.T) {
	for _, s := range chunkSeeds {
		t.Run(s, func(t *testing.T) {
			require.True(t, json.Valid([]byte(s)))
			require.Equal(t, decodedFacts([]byte(s)), inspectAll([]byte(s)))
			require.Equal(t, decodedFacts([]byte(s)), inspect([]byte(s)))
			require.Equal(t, decodedUsage([]byte(s)), wholeUsage(t, []byte(s)))
		})
	}
}

func TestInspectReadsTheLastChunks(t *testing.T) {
	f := inspect([]byte(chunkSeeds[2]))
	require.True(t, f.usageOnly)
	require.Equal(t, Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17, CachedTokens: 3, ReasoningTokens: 2}, f.usage.usage())
	require.True(t, inspect([]byte(chunkSeeds[1])).finished)
	require.False(t, inspect([]byte(chunkSeeds[0])).finished)
	require.True(t, inspect([]byte(chunkSeeds[4])).err)
}

// Token counts written as whole-valued floats (some compatible servers send
// "prompt_tokens":3.0) are read as those counts, in a chunk and in a whole
// answer, and a count that is not a whole number counts 0 without hiding
// the chunk's finish reason.
func TestUsageCountsWrittenAsFloats(t *testing.T) {
	stop := []byte(`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3.0,"completion_tokens":1.0,"total_tokens":4.0}}`)
	f := inspect(stop)
	require.True(t, f.finished)
	require.Equal(t, Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}, f.usage.usage())
	require.Equal(t, Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}, wholeUsage(t, stop))

	odd := []byte(`{"choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":30e-1,"completion_tokens":1.5,"total_tokens":"4"}}`)
	f = inspect(odd)
	require.True(t, f.finished)
	require.Equal(t, Usage{PromptTokens: 3, TotalTokens: 3}, f.usage.usage())

	// Details that are not objects count nothing of their own; the counts
	// beside them stand.
	details := []byte(`{"choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3,"prompt_tokens_details":[3],"completion_tokens_details":"x"}}`)
	require.Equal(t, Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3}, inspect(details).usage.usage())
	require.Equal(t, Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3}, wholeUsage(t, details))
}

// inspectAll is the member reader inspect leaves chunks with oddly spelt
// names to.
func inspectAll(data []byte) chunkFacts {
	return inspectMembers(data)
}

// wholeUsage is the usage a whole answer's read finds; an answer the read
// takes for an upstream error must be one by decoding too (an error member
// that is not null, and no choices), and has the usage decoding finds.
func wholeUsage(t testing.TB, raw []byte) Usage {
	_, u, err := chatOpenAI{}.whole(inbound{}, raw, "m")
	var d struct {
		Error   json.RawMessage `json:"error"`
		Choices json.RawMessage `json:"choices"`
	}
	isError := json.Unmarshal(raw, &d) == nil && d.Error != nil && string(d.Error) != "null" && d.Choices == nil
	if isError {
		require.Error(t, err, "an error answered with a 200 is a failed attempt")
		return decodedUsage(raw)
	}
	require.NoError(t, err)
	return u
}

func FuzzInspect(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || hasDuplicateKeys(data) {
			return
		}
		require.Equal(t, decodedFacts(data), inspectAll(data), "%s", data)
		require.Equal(t, decodedFacts(data), inspect(data), "%s", data)
		require.Equal(t, decodedUsage(data), wholeUsage(t, data), "%s", data)
	})
}

// hasDuplicateKeys reports whether an object of data repeats a name
// (encoding/json merges repeated objects; upstreams do not send them).
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj  bool
		seen map[string]bool
		key  bool // the next string in an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: v == '{', seen: map[string]bool{}, key: v == '{'})
				continue
			default:
				stack = stack[:len(stack)-1]
				continue
			}
		case string:
			if top != nil && top.obj && top.key {
				k := string(bytes.ToLower([]byte(v)))
				if top.seen[k] {
					return true
				}
				top.seen[k] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}

// The last chunks and a whole answer, read by decoding (as before) and by
// the raw reader.
func BenchmarkReadFacts(b *testing.B) {
	finish := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)
	whole := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` + string(bytes.Repeat([]byte("lorem ipsum "), 40)) + `","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"system_fingerprint":"fp_1"}`)
	content := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	b.Run("content/scan", func(b *testing.B) {
		for b.Loop() {
			inspect(content)
		}
	})
	b.Run("chunk/decode", func(b *testing.B) {
		for b.Loop() {
			decodedFacts(finish)
		}
	})
	b.Run("chunk/scan", func(b *testing.B) {
		for b.Loop() {
			inspect(finish)
		}
	})
	b.Run("whole/decode", func(b *testing.B) {
		for b.Loop() {
			_ = json.Valid(whole)
			decodedUsage(whole)
		}
	})
	b.Run("whole/scan", func(b *testing.B) {
		for b.Loop() {
			_, _, _ = chatOpenAI{}.whole(inbound{}, whole, "m")
		}
	})
}

var bodySeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
	` {"model" : "m" , "messages" : [ ] } `,
	`{"model":"m","messages":{"role":"user"}}`,
	`{"model":"m","messages":null}`,
	`{"model":"m","input":"hi"}`,
	`{"model":"m","input":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","input":5}`,
	`{"mod\u0065l":"m","messages":[1],"model":"n"}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
	`[]`,
	`null`,
	`{"model":"m"`,
	`{"model":"m","messages":[1]} x`,
}

// decodedParse is parse's verdict and fields when it decoded the body with
// encoding/json.
func decodedParse(d Dialect, body []byte) (map[string]json.RawMessage, string) {
	// Bytes that are not text are refused before anything is read.
	if !utf8.Valid(body) {
		return nil, "invalid_encoding"
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return nil, "invalid_json"
	}
	if jsonscan.LoneSurrogate(body) {
		return nil, "invalid_encoding"
	}
	code := func(name string) string {
		var list []json.RawMessage
		if json.Unmarshal(fields[name], &list) != nil {
			return "invalid_type"
		}
		if len(list) == 0 {
			return "empty_array"
		}
		return ""
	}
	switch {
	case d == DialectResponses:
		var s string
		var list []json.RawMessage
		if in, ok := fields["input"]; ok && string(in) != "null" && json.Unmarshal(in, &s) != nil && json.Unmarshal(in, &list) != nil {
			return fields, "invalid_type"
		}
	case fields["messages"] != nil && string(fields["messages"]) != "null":
		return fields, code("messages")
	}
	return fields, ""
}

func TestParseAgreesWithDecoding(t *testing.T) {
	for _, s := range bodySeeds {
		for _, d := range []Dialect{DialectChat, DialectResponses} {
			checkParse(t, d, []byte(s))
		}
	}
}

func checkParse(t *testing.T, d Dialect, body []byte) {
	t.Helper()
	wantFields, wantCode := decodedParse(d, body)
	in, err := parse(d, body)
	if wantCode == "invalid_json" || wantCode == "invalid_encoding" {
		var re *RequestError
		require.ErrorAs(t, err, &re, "%s", body)
		require.Equal(t, wantCode, re.Code, "%s", body)
		return
	}
	require.Equal(t, len(wantFields), len(in.fields), "%s", body)
	for k, v := range wantFields {
		require.Equal(t, string(v), string(in.fields[k]), "%s: %s", body, k)
	}
	// The list's verdict, unless parse stopped earlier (at the model or
	// the stream flag, which it checks first).
	var re *RequestError
	if errors.As(err, &re) && (re.Param == "model" || re.Param == "stream") {
		return
	}
	if wantCode == "" {
		if err != nil {
			list := re.Param == "messages" || re.Param == "input"
			require.False(t, list && re.Code != "missing_required_parameter", "%s: %v", body, err)
		}
		return
	}
	require.ErrorAs(t, err, &re, "%s", body)
	require.Equal(t, wantCode, re.Code, "%s", body)
}

func FuzzParseAgreesWithDecoding(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if json.Valid(body) && hasDuplicateKeys(body) {
			return
		}
		checkParse(t, DialectChat, body)
		checkParse(t, DialectResponses, body)
	})
}

// A chat request read by decoding (as before) and by the raw reader.
func BenchmarkParse(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + string(bytes.Repeat([]byte("tell me more "), 30)) + `"}],"temperature":0.2,"max_tokens":256,"stream":false}`)
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			decodedParse(DialectChat, body)
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			_, _ = parse(DialectChat, body)
		}
	})
}

// inspect reads a chunk's facts as a stream does (walk.chunkFacts), falling
// back to inspectMembers for data that is not valid JSON.
func inspect(data []byte) chunkFacts {
	w := walk{names: chunkNames, choices: true}
	if !w.run(data) {
		return inspectMembers(data)
	}
	return w.chunkFacts()
}
