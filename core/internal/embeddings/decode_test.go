package embeddings

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// refVector is how vector read a base64 vector before: json.Unmarshal of
// the string, then base64.DecodeString.
func refVector(raw json.RawMessage) ([]float32, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errBadBody
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errBadBody
		}
		return FromBase64Bytes(b), nil
	}
	return vector(raw)
}

// refDecode is decode with refVector.
func refDecode(raw []byte) (decoded, error) {
	var w wireBody
	if err := json.Unmarshal(raw, &w); err != nil || w.Data == nil {
		return decoded{}, errBadBody
	}
	d := decoded{model: w.Model, promptTokens: w.Usage.PromptTokens, totalTokens: w.Usage.TotalTokens}
	if d.totalTokens == 0 {
		d.totalTokens = d.promptTokens
	}
	slices.SortStableFunc(w.Data, func(a, b struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}) int {
		return a.Index - b.Index
	})
	for _, item := range w.Data {
		v, err := refVector(item.Embedding)
		if err != nil {
			return decoded{}, err
		}
		d.vectors = append(d.vectors, v)
	}
	if d.vectors == nil {
		d.vectors = [][]float32{}
	}
	return d, nil
}

// decode reads what it read before it took base64 strings in place.
func FuzzDecodeAgrees(f *testing.F) {
	for _, s := range []string{
		string(upstreamBody(FormatBase64, 4)), string(upstreamBody(FormatFloat, 4)),
		`{"data":[{"index":1,"embedding":"AAAAAA=="},{"index":0,"embedding":"AACAPw=="}],"usage":{"prompt_tokens":2}}`,
		`{"data":[{"embedding":"AACA\/w=="}]}`, `{"data":[{"embedding":"AAC\u0041Pw=="}]}`, `{"data":[{"embedding":"AAA="}]}`,
		`{"data":[{"embedding":"AACAPw==\n"}]}`, `{"data":[{"embedding":"AAC` + "\xff" + `Pw=="}]}`, `{"data":[{"embedding":"!!"}]}`,
		`{"data":[{"embedding":""}]}`, `{"data":[{"embedding":"AACAPw"}]}`, `{"data":[]}`, `{"data":[{"embedding":[1,2]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decode(raw)
		want, wantErr := refDecode(raw)
		require.Equal(t, wantErr == nil, err == nil, "%q", raw)
		if err == nil {
			require.Equal(t, want.model, got.model)
			require.Equal(t, want.promptTokens, got.promptTokens)
			require.Equal(t, want.totalTokens, got.totalTokens)
			require.Equal(t, len(want.vectors), len(got.vectors))
			for i := range want.vectors {
				require.Equal(t, len(want.vectors[i]), len(got.vectors[i]))
				for j := range want.vectors[i] {
					// Compare bits: a NaN decoded from base64 is not equal to itself.
					if a, b := want.vectors[i][j], got.vectors[i][j]; a != b && (a == a || b == b) {
						t.Fatalf("%q: vector %d[%d] = %v, want %v", raw, i, j, b, a)
					}
				}
			}
		}
	})
}

// BenchmarkDecode reads a 1,536-dimension base64 answer into vectors, as a
// gRPC caller's request does.
func BenchmarkDecode(b *testing.B) {
	raw := upstreamBody(FormatBase64, 1536)
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := refDecode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("after", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
