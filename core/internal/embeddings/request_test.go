package embeddings

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// marshalRequest is how the upstream request body was built before
// appendRequest: json.Marshal of upstreamRequest.
func marshalRequest(model string, req *Request, format string) []byte {
	var input any = req.Texts
	if req.Tokens != nil {
		input = req.Tokens
	}
	b, err := json.Marshal(upstreamRequest{Model: model, Input: input, EncodingFormat: format, Dimensions: req.Dimensions, User: req.User})
	if err != nil {
		panic(err)
	}
	return b
}

func TestAppendRequestWritesWhatJSONMarshalWrites(t *testing.T) {
	dims := int32(256)
	for name, req := range map[string]Request{
		"text":        {Texts: []string{"The quick brown fox"}},
		"texts":       {Texts: []string{"a", "b <c> & \"d\"\\", "é\u2028\x00\xff"}, Dimensions: &dims, User: "u-1"},
		"tokens":      {Tokens: [][]int64{{1, -2, 9007199254740993}, {4}}, User: "<script>"},
		"empty":       {Texts: []string{}},
		"nil token":   {Tokens: [][]int64{nil, {}}},
		"none at all": {},
	} {
		for _, model := range []string{"text-embedding-3-small", "a\"b\tc"} {
			got := appendRequest(nil, model, &req, FormatBase64)
			assert.Equal(t, string(marshalRequest(model, &req, FormatBase64)), string(got), name)
			assert.GreaterOrEqual(t, requestSize(model, &req)+8, len(got)/2, name)
		}
	}
}

// Whatever the strings and token ids, appendRequest writes json.Marshal's
// bytes: the upstream gets the request it got before.
func FuzzAppendRequest(f *testing.F) {
	f.Add("text-embedding-3-small", "The quick brown fox", "", []byte{}, false, false)
	f.Add("m", "a\x1fb\x00c<d>&\u2028\u2029\xff\xfe\"\\", "user\n", []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, true, true)
	f.Add("é", "one\x1etwo\x1ethree", "<u>", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, true, false)
	f.Fuzz(func(t *testing.T, model, texts, user string, tokens []byte, useTokens, withDims bool) {
		req := Request{User: user}
		if useTokens {
			req.Tokens = [][]int64{}
			for len(tokens) >= 8 {
				n := int(tokens[0] % 4)
				toks := []int64{}
				for ; n > 0 && len(tokens) >= 8; n-- {
					toks = append(toks, int64(binary.LittleEndian.Uint64(tokens)))
					tokens = tokens[8:]
				}
				if len(tokens) > 0 {
					tokens = tokens[1:]
				}
				req.Tokens = append(req.Tokens, toks)
			}
		} else {
			req.Texts = strings.Split(texts, "\x1e")
		}
		if withDims {
			d := int32(len(texts)*7919 - 1000)
			req.Dimensions = &d
		}
		want := marshalRequest(model, &req, FormatFloat)
		got := appendRequest(make([]byte, 0, requestSize(model, &req)), model, &req, FormatFloat)
		require.Equal(t, string(want), string(got))
	})
}

func BenchmarkUpstreamRequest(b *testing.B) {
	req := Request{Texts: []string{"The quick brown fox"}}
	model := "text-embedding-3-small"
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			marshalRequest(model, &req, FormatFloat)
		}
	})
	b.Run("after", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			appendRequest(make([]byte, 0, requestSize(model, &req)), model, &req, FormatFloat)
		}
	})
}

// Extra members follow the request's own, as they came; ValidExtra refuses
// what is not an object and members the request's own fields write.
func TestAppendRequestWithExtraMembers(t *testing.T) {
	req := Request{Texts: []string{"x"}, User: "u", Extra: []byte(` { "input_type":"query", "task":{"a":1} } `)}
	got := appendRequest(nil, "m", &req, FormatFloat)
	assert.Equal(t, `{"model":"m","input":["x"],"encoding_format":"float","user":"u","input_type":"query", "task":{"a":1}}`, string(got))
	assert.True(t, json.Valid(got))
	assert.GreaterOrEqual(t, requestSize("m", &req), len(got))

	for _, empty := range []string{"", "{}", " { } "} {
		req.Extra = []byte(empty)
		assert.Equal(t, `{"model":"m","input":["x"],"encoding_format":"float","user":"u"}`, string(appendRequest(nil, "m", &req, FormatFloat)), empty)
	}

	for extra, want := range map[string]string{`{"input_type":"q"}`: "", `{"a":1,"Model":"x"}`: "Model", `{"encoding_format":"float"}`: "encoding_format"} {
		key, err := ValidExtra([]byte(extra))
		require.NoError(t, err, extra)
		assert.Equal(t, want, key, extra)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":`, `null`} {
		_, err := ValidExtra([]byte(bad))
		assert.Error(t, err, bad)
	}
}
