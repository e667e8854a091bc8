package chat

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A long stop sequence costs the filter work in proportion to the text, not
// to the text times the sequence: text that begins a 20,000-character
// sequence, streamed a character a delta as a Responses upstream streams
// tokens, is held whole and then let go when it turns out not to be the
// sequence, and all the filter copies on the way is about the text once.
func TestStopTextCopiesTheTextOnce(t *testing.T) {
	const n = 20_000
	seq := strings.Repeat("a", n)
	s := stopText{seqs: []string{seq, "b" + seq}}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n - 1 {
		out, q := s.push("a")
		if out != "" || q != "" {
			require.Failf(t, "a beginning of the sequence went on", "%q %q", out, q)
		}
	}
	out, q := s.push("c")
	runtime.ReadMemStats(&after)
	assert.Equal(t, strings.Repeat("a", n-1)+"c", out, "the held text goes on once it is no sequence")
	assert.Empty(t, q)
	copied := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, copied, uint64(64*n), "bytes allocated for %d characters of text", n)
}

// The filter's cost per character of text with a long sequence, as a
// hostile request and upstream make it: the text held a character a delta
// (each delta rescanning what was held), and a held beginning that the
// last character tells from the sequence (each end of the text compared
// with each beginning of the sequence).
func BenchmarkStopText(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		seq := strings.Repeat("a", n)
		b.Run("held a character a delta/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				s := stopText{seqs: []string{seq}}
				for range n - 1 {
					s.push("a")
				}
				s.push("b")
			}
		})
		b.Run("told apart at the end/"+strconv.Itoa(n), func(b *testing.B) {
			text := strings.Repeat("a", n-1) + "b"
			b.SetBytes(int64(n))
			for b.Loop() {
				s := stopText{seqs: []string{seq}}
				s.push(text)
			}
		})
	}
}
