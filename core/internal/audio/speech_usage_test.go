package audio

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The usage of a speech streamed as events is its speech.audio.done
// event's, however the stream's bytes are split, whatever its line ends,
// after audio deltas longer than the line speechDone keeps.
func TestSpeechDoneUsage(t *testing.T) {
	long := "data: {\"type\":\"speech.audio.delta\",\"audio\":\"" + strings.Repeat("A", 3*maxDoneLine) + "\"}"
	for name, tc := range map[string]struct {
		stream string
		want   [3]int64
	}{
		"lf":                              {long + "\n\ndata: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":14,\"output_tokens\":101,\"total_tokens\":115}}\n\n", [3]int64{14, 101, 115}},
		"crlf and a name":                 {long + "\r\n\r\nevent: speech.audio.done\r\ndata:{\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":2,\"output_tokens\":3}}\r\n\r\n", [3]int64{2, 3, 5}},
		"no done event":                   {long + "\n\n", [3]int64{}},
		"a delta that names it":           {"data: {\"type\":\"speech.audio.delta\",\"audio\":\"speech.audio.done\",\"usage\":{\"input_tokens\":9}}\n\n", [3]int64{}},
		"a done event too long to be one": {"data: {\"type\":\"speech.audio.done\",\"pad\":\"" + strings.Repeat(" ", maxDoneLine) + "\",\"usage\":{\"input_tokens\":9}}\n\n", [3]int64{}},
		// As a chat answer's usage is billed: a bad upstream cannot make
		// the bill negative or wrap it around.
		"negative counts":  {"data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":-14,\"output_tokens\":101,\"total_tokens\":-115}}\n\n", [3]int64{0, 101, 101}},
		"a sum past int64": {"data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":9223372036854775807,\"output_tokens\":2}}\n\n", [3]int64{math.MaxInt64, 2, math.MaxInt64}},
	} {
		for _, size := range []int{1, 2, 7, 1000, len(tc.stream)} {
			var out SpeechResult
			d := &speechDone{out: &out}
			for rest := tc.stream; len(rest) > 0; {
				n := min(size, len(rest))
				m, err := d.Write([]byte(rest[:n]))
				assert.NoError(t, err)
				assert.Equal(t, n, m)
				rest = rest[n:]
			}
			assert.Equal(t, tc.want, [3]int64{out.InputTokens, out.OutputTokens, out.TotalTokens}, "%s, in pieces of %d", name, size)
			assert.LessOrEqual(t, cap(d.line), 2*maxDoneLine+64, "%s: the line kept is bounded", name)
		}
	}
}
