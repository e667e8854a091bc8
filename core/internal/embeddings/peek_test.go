package embeddings

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// The pass-through path as it read bodies before peek: three scans of the
// whole body (shape, then usage and model, each through json.Unmarshal).
// peek must read what these read, whatever the body.

func refHasShape(raw []byte, format string) bool {
	if !bytes.Contains(raw, []byte(`"usage"`)) || !bytes.Contains(raw, []byte(`"data"`)) {
		return false
	}
	return firstEmbedding(raw, format)
}

// refMember is how member read a value first: the first JSON value after
// the key, through a json.Decoder.
func refMember(raw []byte, name string) []byte {
	key := []byte(`"` + name + `"`)
	i := bytes.LastIndex(raw, key)
	if i < 0 {
		return nil
	}
	j := jsonscan.SkipSpace(raw, i+len(key))
	if j >= len(raw) || raw[j] != ':' {
		return nil
	}
	var v json.RawMessage
	if json.NewDecoder(bytes.NewReader(raw[j+1:])).Decode(&v) != nil {
		return nil
	}
	return v
}

// oldMember is how member read a value before peek: delimited by
// valueEnd, to be decoded by json.Unmarshal.
func oldMember(raw []byte, name string) []byte {
	key := []byte(`"` + name + `"`)
	i := bytes.LastIndex(raw, key)
	if i < 0 {
		return nil
	}
	return valueAfter(raw, i+len(key))
}

func refPeekUsage(raw []byte, member func([]byte, string) []byte) (prompt, total int64) {
	var u struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	}
	if obj := member(raw, "usage"); obj != nil && json.Unmarshal(obj, &u) == nil {
		if u.TotalTokens == 0 {
			u.TotalTokens = u.PromptTokens
		}
		return u.PromptTokens, u.TotalTokens
	}
	return 0, 0
}

func refPeekModel(raw []byte, member func([]byte, string) []byte) string {
	var m string
	if v := member(raw, "model"); v != nil && json.Unmarshal(v, &m) == nil {
		return m
	}
	return ""
}

func refPeek(raw []byte, format string, member func([]byte, string) []byte) (model string, prompt, total int64, ok bool) {
	if !refHasShape(raw, format) {
		return "", 0, 0, false
	}
	prompt, total = refPeekUsage(raw, member)
	return refPeekModel(raw, member), prompt, total, true
}

// upstreamBody is an answer as OpenAI sends it: one vector of dims values.
func upstreamBody(format string, dims int) []byte {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(i%97)/97 - 0.5 + float32(i)*1e-7
	}
	b := encode(decoded{model: "text-embedding-3-small", vectors: [][]float32{v}, promptTokens: 5, totalTokens: 5}, format)
	return bytes.TrimSpace(b)
}

// peek reads what the former three scans read, for every body.
func FuzzPeekAgreesWithScans(f *testing.F) {
	for _, s := range []string{
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAA"}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`,
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,1]}],"model":"m","usage":{"prompt_tokens":5,"total_tokens":0}}`,
		`{"data":[{"embedding":[1]}],"model" : "m\"x" ,"usage" : { "prompt_tokens" : 7 } }`,
		`{"data":[{"embedding":[1]}],"usage" : { "prompt_tokens" : 7 , "total_tokens" : -0 } }`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":07,"total_tokens":1}}`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":1.5,"total_tokens":1}}`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":1e2,"total_tokens":1}}`,
		`{"data":[{"embedding":[1]}],"usage":{"PROMPT_TOKENS":3,"total_tokens":1}}`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":99999999999999999999,"total_tokens":1}}`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":-999999999999999999,"total_tokens":999999999999999999}}`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":1,"total_tokens":2,"x":1}}`,
		`{"data":[{"embedding":[1]}],"usage":{"prompt_tokens":1,"total_tokens":2}x`,
		`{"data":[{"embedding":[1]}],"model":"\u00e9\ud83d\ude00","usage":{}}`,
		`{"data":[{"embedding":[1]}],"model":"caf` + "\xff" + `","usage":{}}`,
		`{"data":[{"embedding":[1]}],"model":"a` + "\t" + `b","usage":{}}`,
		`{"data":[{"embedding":[1]}],"model":"","usage":{}}`,
		`{"data":[{"embedding":[1]}],"model":"abc`,
		`{"usage":null,"model":null}`, `{"usage":5x,"model":12}`, `{"usage":{"prompt_tokens":3}garbage`,
		`{"model":"a\\"}`, `{"usage":{"a":]}}`, `{"usage":[{"prompt_tokens":1}]}`, `{"model":`, `"usage":"model"`,
		`{"usage":{"prompt_tokens":2,"total_tokens":9},"usage":{"prompt_tokens":4}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, b64 bool) {
		format := FormatFloat
		if b64 {
			format = FormatBase64
		}
		model, prompt, total, ok := peek(raw, format)
		wModel, wPrompt, wTotal, wOK := refPeek(raw, format, refMember)
		if ok != wOK || model != wModel || prompt != wPrompt || total != wTotal {
			t.Fatalf("peek(%q, %s) = %q %d %d %v, want %q %d %d %v", raw, format, model, prompt, total, ok, wModel, wPrompt, wTotal, wOK)
		}
	})
}

func TestPeekReadsOpenAIAnswers(t *testing.T) {
	for _, format := range []string{FormatFloat, FormatBase64} {
		raw := upstreamBody(format, 1536)
		model, prompt, total, ok := peek(raw, format)
		if !ok || model != "text-embedding-3-small" || prompt != 5 || total != 5 {
			t.Fatalf("%s: %q %d %d %v", format, model, prompt, total, ok)
		}
		// The usage object as OpenAI spaces it.
		spaced := bytes.Replace(raw, []byte(`"usage":{"prompt_tokens":5,"total_tokens":5}`),
			[]byte("\"usage\": {\n    \"prompt_tokens\": 12,\n    \"total_tokens\": 12\n  }\n"), 1)
		if _, prompt, total, _ = peek(spaced, format); prompt != 12 || total != 12 {
			t.Fatalf("%s spaced: %d %d", format, prompt, total)
		}
	}
}

// BenchmarkPeek reads a 1,536-dimension answer as the pass-through path
// does: before (three scans, json.Unmarshal) and now (peek).
func BenchmarkPeek(b *testing.B) {
	for _, format := range []string{FormatFloat, FormatBase64} {
		raw := upstreamBody(format, 1536)
		b.Run(format+"/before/"+strconv.Itoa(len(raw)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, ok := refPeek(raw, format, oldMember); !ok {
					b.Fatal("no shape")
				}
			}
		})
		b.Run(format+"/after/"+strconv.Itoa(len(raw)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, ok := peek(raw, format); !ok {
					b.Fatal("no shape")
				}
			}
		})
	}
}
