package embeddings

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHasShape(t *testing.T) {
	floatBody := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`
	b64Body := `{"object":"list","data":[{"object":"embedding","index":0,"embedding" : "AAAAAA=="}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`
	assert.True(t, hasShape([]byte(floatBody), FormatFloat))
	assert.False(t, hasShape([]byte(floatBody), FormatBase64))
	assert.True(t, hasShape([]byte(b64Body), FormatBase64))
	assert.False(t, hasShape([]byte(b64Body), FormatFloat))
	assert.False(t, hasShape([]byte(`{"data":[{"embedding":[1]}]}`), FormatFloat), "no usage: normalise")
	assert.False(t, hasShape([]byte(`{"object":"embedding","usage":{},"data":[]}`), FormatFloat))
}

func TestDecodeEncodeRoundTrip(t *testing.T) {
	v := []float32{0.5, -0.125, 3.25e-7, 1}
	for _, format := range []string{FormatFloat, FormatBase64} {
		body := encode(decoded{model: "m", vectors: [][]float32{v, {2}}, promptTokens: 4, totalTokens: 4}, format)
		assert.True(t, hasShape(body, format), "%s", body)
		d, err := decode(body)
		require.NoError(t, err)
		assert.Equal(t, [][]float32{v, {2}}, d.vectors, format)
		assert.Equal(t, "m", d.model)
		p, tot := peekUsage(body)
		assert.EqualValues(t, 4, p)
		assert.EqualValues(t, 4, tot)
		assert.Equal(t, "m", peekModel(body))
	}
}

func TestDecodeOrdersByIndexAndRejectsGarbage(t *testing.T) {
	d, err := decode([]byte(`{"data":[{"index":1,"embedding":[2]},{"index":0,"embedding":[1]}],"usage":{"prompt_tokens":2}}`))
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{1}, {2}}, d.vectors)
	assert.EqualValues(t, 2, d.totalTokens, "total falls back to prompt tokens")
	for _, bad := range []string{`[]`, `{"data":[{"embedding":"!!"}]}`, `{"data":[{"embedding":{}}]}`, `{}`, `{"data":[{"embedding":"AAA="}]}`} {
		_, err := decode([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// decodedMember is how member read a value before: the first JSON value
// after the key, through a json.Decoder.
func decodedMember(raw []byte, name string) []byte {
	key := []byte(`"` + name + `"`)
	i := bytes.LastIndex(raw, key)
	if i < 0 {
		return nil
	}
	j := skipSpace(raw, i+len(key))
	if j >= len(raw) || raw[j] != ':' {
		return nil
	}
	var v json.RawMessage
	if json.NewDecoder(bytes.NewReader(raw[j+1:])).Decode(&v) != nil {
		return nil
	}
	return v
}

// peekUsage and peekModel read what they read when member went through a
// json.Decoder, whatever the body.
func FuzzPeekAgreesWithDecoder(f *testing.F) {
	for _, s := range []string{
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAA"}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`,
		`{"data":[],"model" : "m\"x" ,"usage" : { "prompt_tokens" : 7 } }`,
		`{"usage":null,"model":null}`, `{"usage":5x,"model":12}`, `{"usage":{"prompt_tokens":3}garbage`,
		`{"model":"a\\"}`, `{"usage":{"a":]}}`, `{"usage":[{"prompt_tokens":1}]}`, `{"model":`, `"usage":"model"`,
		`{"usage":{"prompt_tokens":2,"total_tokens":9},"usage":{"prompt_tokens":4}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var wantU struct {
			PromptTokens int64 `json:"prompt_tokens"`
			TotalTokens  int64 `json:"total_tokens"`
		}
		var wantPrompt, wantTotal int64
		if obj := decodedMember(raw, "usage"); obj != nil && json.Unmarshal(obj, &wantU) == nil {
			wantPrompt, wantTotal = wantU.PromptTokens, wantU.TotalTokens
			if wantTotal == 0 {
				wantTotal = wantPrompt
			}
		}
		prompt, total := peekUsage(raw)
		if prompt != wantPrompt || total != wantTotal {
			t.Fatalf("usage of %q: %d/%d, want %d/%d", raw, prompt, total, wantPrompt, wantTotal)
		}
		wantModel := ""
		if v := decodedMember(raw, "model"); v != nil {
			_ = json.Unmarshal(v, &wantModel)
		}
		if got := peekModel(raw); got != wantModel {
			t.Fatalf("model of %q: %q, want %q", raw, got, wantModel)
		}
	})
}

func BenchmarkPeek(b *testing.B) {
	raw := []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`)
	b.ReportAllocs()
	for b.Loop() {
		peekUsage(raw)
		peekModel(raw)
	}
}
