package chat

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodedFacts is what inspect reported when it decoded the whole chunk
// with encoding/json: the reference the raw reader must agree with.
func decodedFacts(data []byte) chunkFacts {
	var f chunkFacts
	var c struct {
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *usageJSON      `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &c) != nil {
		return f
	}
	f.usage = c.Usage
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
// answer.
func decodedUsage(raw []byte) Usage {
	var body struct {
		Usage *usageJSON `json:"usage"`
	}
	_ = json.Unmarshal(raw, &body)
	return body.Usage.usage()
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
}

func TestInspectAgreesWithDecoding(t *testing.T) {
	for _, s := range chunkSeeds {
		t.Run(s, func(t *testing.T) {
			require.True(t, json.Valid([]byte(s)))
			require.Equal(t, decodedFacts([]byte(s)), inspectAll([]byte(s)))
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

// inspectAll is inspect without its shortcut for chunks that mention
// nothing it reads, so that every chunk is compared.
func inspectAll(data []byte) chunkFacts {
	return inspectMembers(data)
}

func wholeUsage(t testing.TB, raw []byte) Usage {
	_, u, err := chatOpenAI{}.whole(raw, "m")
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
			_, _, _ = chatOpenAI{}.whole(whole, "m")
		}
	})
}
