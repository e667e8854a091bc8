package embeddings

import (
	"strconv"
	"strings"
	"testing"
)

// embeddingsBody is an OpenAI embeddings list of n vectors of dims floats.
func embeddingsBody(n, dims int) []byte {
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"object":"embedding","index":` + strconv.Itoa(i) + `,"embedding":[`)
		for d := range dims {
			if d > 0 {
				b.WriteByte(',')
			}
			b.WriteString("-0.0123456789")
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`)
	return []byte(b.String())
}

// The last vector's index is read without walking its floats back a byte
// at a time.
func BenchmarkLastIndex(b *testing.B) {
	raw := embeddingsBody(1, 1536)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if lastIndex(raw) != 0 {
			b.Fatal("wrong index")
		}
	}
}

func TestLastIndexOfLists(t *testing.T) {
	for _, n := range []int{1, 2, 7} {
		if got := lastIndex(embeddingsBody(n, 8)); got != int64(n-1) {
			t.Fatalf("%d vectors: last index %d", n, got)
		}
	}
	for _, raw := range []string{`{"data":[]}`, `{"object":"index"}`, `{"index":"x"}`, `{"index":1.5}`} {
		if got := lastIndex([]byte(raw)); got != -1 {
			t.Fatalf("%s: last index %d, want -1", raw, got)
		}
	}
}
