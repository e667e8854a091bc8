package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validSeeds are the edges of JSON's grammar where a hand-written
// validator and encoding/json could part: numbers, literals, escapes,
// control characters, bytes that are not UTF-8, spaces around the value,
// nothing at all, nesting.
var validSeeds = []string{
	``, ` `, "\t\n\r ", `{}`, `[]`, ` {} `, "\n[1]\n", `{} {}`, `{}x`, `{`, `}`, `[`, `]`, `[1,]`, `[,1]`, `{"a":1,}`,
	`{,}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`, `{"a":1}}`, `[[]`, `[]]`,
	`0`, `-0`, `-`, `01`, `-01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e5`, `1E-5`, `1.5e+10`, `-1.0E0`, `+1`,
	`1e05`, `00`, `0.0.0`, `1ee5`, `0x10`, `Infinity`, `NaN`, `1_000`, `9999999999999999999999999999`,
	`true`, `false`, `null`, `tru`, `truex`, `nul`, `nulll`, `True`, `NULL`, `true false`, `[true,false,null]`,
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00"`, `"\x"`,
	`"\'"`, `"\`, `"abc`, `"a"b"`, "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\t\"", "\"\n\"", "\"\xff\xfe\"",
	"\"\xc3\"", "\"\xed\xa0\x80\"", "\"é\"", `"\ud800"`, `"\ud83d\ude00"`, "{\"\xff\":1}", "\xef\xbb\xbf{}",
	`{"a":[1,{"b":null}],"c":"d"}`, ` { "a" : [ 1 , 2 ] , "b" : { } } `, "{\"a\":\n1}", `[[[[[[]]]]]]`,
	`{"choices":[{"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`,
}

// nested is n arrays, one in the other.
func nested(n int) []byte {
	return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range validSeeds {
		require.Equal(t, json.Valid([]byte(s)), validJSON([]byte(s)), "%q", s)
	}
	for _, n := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		require.Equal(t, json.Valid(nested(n)), validJSON(nested(n)), "nested %d deep", n)
	}
	deepObject := []byte(strings.Repeat(`{"a":`, maxNesting+1) + "1" + strings.Repeat("}", maxNesting+1))
	require.False(t, validJSON(deepObject))
	require.False(t, validJSON(nested(maxNesting+1)), "deeper than encoding/json allows")
	require.True(t, validJSON(nested(maxNesting)))
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range append(validSeeds, chunkSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		require.Equal(t, json.Valid(data), validJSON(data), "%q", data)
	})
}

// walkSeeds are chunks whose names are spelt oddly, which the walk leaves
// to the slower readers, and chunks whose text members a substring search
// could misread.
var walkSeeds = []string{
	`{"choic\u0065s":[{"finish_reason":"stop"}]}`,
	`{"choices":[{"finish_re\u0061son":"stop"}]}`,
	"{\"choiceſ\":[{\"finish_reason\":\"stop\"}]}",
	"{\"choices\":[{\"finiſh_reason\":\"stop\"}],\"uſage\":{\"total_tokens\":2}}",
	`{"choices":[{"finish_reason":"stop"},{"finish_reason":7}]}`,
	`{"choices":[1]}`, `{"choices":{}}`, `{"choices":null,"usage":{"total_tokens":1}}`,
	`{"choices":[{"finish_reason":"stop"}],"choices":[]}`,
	`{"choices":[{"finish_reason":"stop","finish_reason":null}]}`,
	`{"a":"content","content" : "xy","content":"é\u00e9\n","b":{"reasoning_content":"z"}}`,
	"{\"content\"\n:\"no\",\"content\":\n\"no\",\"refusal\":\t\"yes\",\"arguments\": 1}",
	`{"x\"content":"q","x\\":"content\"","text":"te\"xt","x\"text":"ab","partial_json":"{}","delta":"d"}`,
	`["content","text"]`, `"content"`, `{"content":{"content":"a"}}`,
}

// The walk reads a chunk's facts as inspectMembers does and counts the
// delivered text as deliveredChars does, for every dialect's members.
func FuzzWalk(f *testing.F) {
	for _, s := range append(append(walkSeeds, chunkSeeds...), validSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkWalk(t, data)
	})
}

func TestWalkAgreesWithTheReaders(t *testing.T) {
	for _, s := range append(append(walkSeeds, chunkSeeds...), validSeeds...) {
		checkWalk(t, []byte(s))
	}
}

func checkWalk(t *testing.T, data []byte) {
	t.Helper()
	for _, event := range []string{"", "content_block_delta", "response.output_text.delta"} {
		w := walk{names: chunkNames, text: deliveredMembers(event), choices: true}
		ok := w.run(data)
		require.Equal(t, json.Valid(data), ok, "%q", data)
		if !ok {
			continue
		}
		require.Equal(t, inspectMembers(data), w.chunkFacts(), "%q", data)
		require.Equal(t, deliveredChars(event, data), w.chars, "%s in %q", event, data)
	}
}

// One content chunk of the fake upstream's stream: validated by
// encoding/json, by the walk alone, and walked for its facts and text.
func BenchmarkWalkChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" brown"},"finish_reason":null}],"usage":null}`)
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			_ = json.Valid(chunk)
		}
	})
	b.Run("validJSON", func(b *testing.B) {
		for b.Loop() {
			_ = validJSON(chunk)
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			w := walk{names: chunkNames, text: chatMembers, choices: true}
			_ = w.run(chunk)
			_ = w.chunkFacts()
		}
	})
}
