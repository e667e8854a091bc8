package chat

import (
	"strings"
	"testing"
)

// The streamed stopper agrees with cutText on the joined text, however the
// text is split (a character a piece included), and both with the plain search
// for the sequence that is complete first.
func FuzzStopText(f *testing.F) {
	f.Add("hello</block>world", "</block>", "</b", 3, 7)
	f.Add("aaab", "aab", "ab", 1, 2)
	f.Add("héllo wörld", "ö", "llo w", 2, 5)
	f.Fuzz(func(t *testing.T, text, a, b string, s1, s2 int) {
		var seqs []string
		for _, q := range []string{a, b} {
			if q != "" {
				seqs = append(seqs, q)
			}
		}
		cuts := []int{}
		for _, c := range []int{s1, s2} {
			if c < 0 {
				c = -c
			}
			if len(text) > 0 {
				cuts = append(cuts, c%(len(text)+1))
			}
		}
		if len(cuts) == 2 && cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		var pieces []string
		prev := 0
		for _, c := range cuts {
			pieces = append(pieces, text[prev:c])
			prev = c
		}
		pieces = append(pieces, text[prev:])
		want, wantSeq := cutText(text, seqs)
		if plain, plainSeq := firstStop(text, seqs); want != plain || wantSeq != plainSeq {
			t.Fatalf("text %q seqs %q: cut %q %q, want %q %q", text, seqs, want, wantSeq, plain, plainSeq)
		}
		for _, pieces := range [][]string{pieces, strings.Split(text, "")} {
			s := stopText{seqs: seqs}
			var got strings.Builder
			gotSeq := ""
			for _, p := range pieces {
				out, seq := s.push(p)
				got.WriteString(out)
				if seq != "" {
					gotSeq = seq
					break
				}
			}
			if gotSeq == "" {
				got.WriteString(s.flush())
			}
			if got.String() != want || gotSeq != wantSeq {
				t.Fatalf("pieces %q seqs %q: got %q %q, want %q %q", pieces, seqs, got.String(), gotSeq, want, wantSeq)
			}
		}
		if wantSeq == "" && want != text {
			t.Fatalf("no sequence but text changed: %q", want)
		}
		if wantSeq != "" && !strings.HasPrefix(text, want+wantSeq) && !strings.Contains(text[len(want):], wantSeq) {
			t.Fatalf("cut %q is not before %q in %q", want, wantSeq, text)
		}
	})
}

// firstStop is text before the first of seqs to be complete (of two
// complete at once, the longer, which began first) and that sequence,
// found by searching the text for each.
func firstStop(text string, seqs []string) (string, string) {
	end, at, seq := -1, 0, ""
	for _, q := range seqs {
		i := strings.Index(text, q)
		if i < 0 {
			continue
		}
		if e := i + len(q); end < 0 || e < end || e == end && i < at {
			end, at, seq = e, i, q
		}
	}
	if seq == "" {
		return text, ""
	}
	return text[:at], seq
}
