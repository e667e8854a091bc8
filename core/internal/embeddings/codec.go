package embeddings

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// decoded is an upstream embeddings body.
type decoded struct {
	model        string
	vectors      [][]float32
	promptTokens int64
	totalTokens  int64
}

type wireBody struct {
	Data []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

var errBadBody = errors.New("not an embeddings list")

// decode reads an OpenAI-shaped body whose vectors are float arrays or
// base64 strings, in index order.
func decode(raw []byte) (decoded, error) {
	var w wireBody
	if err := json.Unmarshal(raw, &w); err != nil || w.Data == nil {
		return decoded{}, errBadBody
	}
	slices.SortStableFunc(w.Data, func(a, b struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}) int {
		return a.Index - b.Index
	})
	d := decoded{model: w.Model, promptTokens: w.Usage.PromptTokens, totalTokens: w.Usage.TotalTokens, vectors: make([][]float32, len(w.Data))}
	if d.totalTokens == 0 {
		d.totalTokens = d.promptTokens
	}
	for i, item := range w.Data {
		v, err := vector(item.Embedding)
		if err != nil {
			return decoded{}, err
		}
		d.vectors[i] = v
	}
	return d, nil
}

func vector(raw json.RawMessage) ([]float32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, errBadBody
	}
	if raw[0] == '"' {
		s, ok := jsonString(raw)
		if !ok {
			return nil, errBadBody
		}
		b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(b, s)
		if err != nil || n%4 != 0 {
			return nil, errBadBody
		}
		return FromBase64Bytes(b[:n]), nil
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, errBadBody
	}
	return v, nil
}

// jsonString is the text of a JSON string, a value json.Unmarshal read
// whole before: the bytes between its quotes when it has no escape (a
// base64 vector never needs one), else what json.Unmarshal makes of it.
func jsonString(raw []byte) ([]byte, bool) {
	if n := len(raw); n >= 2 && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 {
		return raw[1 : n-1], true
	}
	var s string // only here: json.Unmarshal's target escapes
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// FromBase64Bytes reads little-endian float32s, as OpenAI's base64 encoding
// carries them.
func FromBase64Bytes(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// Base64 encodes a vector as OpenAI does: little-endian float32, base64.
func Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// encode writes the OpenAI-shaped body in the wanted format.
func encode(d decoded, format string) []byte {
	n := 64
	for _, v := range d.vectors {
		n += 48 + 12*len(v)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"object":"list","data":[`...)
	for i, v := range d.vectors {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if format == FormatBase64 {
			b = append(b, '"')
			b = append(b, Base64(v)...)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, f := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	model, _ := json.Marshal(d.model)
	b = append(b, model...)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, d.promptTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, d.totalTokens, 10)
	b = append(b, "}}\n"...)
	return b
}

// Keys the pass-through path looks for.
var (
	keyUsage     = []byte(`"usage"`)
	keyModel     = []byte(`"model"`)
	keyData      = []byte(`"data"`)
	keyEmbedding = []byte(`"embedding"`)
	keyIndex     = []byte(`"index"`)
)

// lastIndex is the integer value of the body's last "index" member, the
// last vector's in an embeddings list; -1 when there is none (or it is no
// integer). The member precedes its vector's floats, so it is found by a
// forward search from one occurrence to the next (bytes.Index skips the
// floats, which hold no quote, at vector speed), not by walking the last
// vector's floats back a byte at a time as lastKey would.
func lastIndex(raw []byte) int64 {
	i := -1
	for from := 0; ; {
		j := bytes.Index(raw[from:], keyIndex)
		if j < 0 {
			break
		}
		i = from + j
		from = i + len(keyIndex)
	}
	if i < 0 {
		return -1
	}
	v := valueAfter(raw, i+len(keyIndex))
	n, end, ok := integer(v, 0)
	if !ok || end != len(v) {
		return -1
	}
	return n
}

// peek reads, without decoding the vectors, what passing a body through
// needs: whether it is an OpenAI embeddings list in the wanted format with
// usage (ok), and its usage and model. It looks at the body's head (the
// data member and the first embedding) and at its tail (the usage and
// model members, which follow the vectors), not at the vectors between.
func peek(raw []byte, format string) (model string, prompt, total int64, ok bool) {
	iu := lastKey(raw, keyUsage)
	if iu < 0 || !bytes.Contains(raw, keyData) || !firstEmbedding(raw, format) {
		return "", 0, 0, false
	}
	prompt, total = usageOf(valueAfter(raw, iu+len(keyUsage)))
	return modelOf(member(raw, keyModel)), prompt, total, true
}

// firstEmbedding reports whether the first "embedding" member holds an
// array (float) or a string (base64).
func firstEmbedding(raw []byte, format string) bool {
	rest := raw
	for {
		i := bytes.Index(rest, keyEmbedding)
		if i < 0 {
			return false
		}
		rest = rest[i+len(keyEmbedding):]
		j := jsonscan.SkipSpace(rest, 0)
		if j >= len(rest) || rest[j] != ':' {
			continue // a value such as "object":"embedding"
		}
		j = jsonscan.SkipSpace(rest, j+1)
		if j >= len(rest) {
			return false
		}
		switch rest[j] {
		case '[':
			return format == FormatFloat
		case '"':
			return format == FormatBase64
		}
		return false
	}
}

// usageOf reads a usage object as json.Unmarshal into prompt_tokens and
// total_tokens does (zeros when it cannot), total falling back to prompt.
// The object every upstream sends, {"prompt_tokens":N,"total_tokens":M},
// is read in place; any other goes through json.Unmarshal.
func usageOf(obj []byte) (prompt, total int64) {
	p, t, ok := plainUsage(obj)
	if !ok {
		var u struct {
			PromptTokens int64 `json:"prompt_tokens"`
			TotalTokens  int64 `json:"total_tokens"`
		}
		if obj == nil || json.Unmarshal(obj, &u) != nil {
			return 0, 0
		}
		p, t = u.PromptTokens, u.TotalTokens
	}
	if t == 0 {
		t = p
	}
	return p, t
}

// plainUsage reads exactly {"prompt_tokens":N,"total_tokens":M} (JSON
// whitespace allowed between tokens, N and M integers of at most 18
// digits); ok is false for anything else.
func plainUsage(obj []byte) (prompt, total int64, ok bool) {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, false
	}
	if i, ok = field(obj, i+1, `"prompt_tokens"`); !ok {
		return 0, 0, false
	}
	if prompt, i, ok = integer(obj, i); !ok {
		return 0, 0, false
	}
	if i = jsonscan.SkipSpace(obj, i); i >= len(obj) || obj[i] != ',' {
		return 0, 0, false
	}
	if i, ok = field(obj, i+1, `"total_tokens"`); !ok {
		return 0, 0, false
	}
	if total, i, ok = integer(obj, i); !ok {
		return 0, 0, false
	}
	if i = jsonscan.SkipSpace(obj, i); i >= len(obj) || obj[i] != '}' || jsonscan.SkipSpace(obj, i+1) != len(obj) {
		return 0, 0, false
	}
	return prompt, total, true
}

// field expects the quoted key and a colon at b[i:] (after whitespace) and
// returns where its value starts.
func field(b []byte, i int, key string) (int, bool) {
	i = jsonscan.SkipSpace(b, i)
	if len(b)-i < len(key) || string(b[i:i+len(key)]) != key {
		return 0, false
	}
	i = jsonscan.SkipSpace(b, i+len(key))
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return jsonscan.SkipSpace(b, i+1), true
}

// integer reads a JSON integer of at most 18 digits (so it fits an int64)
// at b[i:] and returns where it ends; ok is false for anything else,
// fractions and exponents included.
func integer(b []byte, i int) (n int64, end int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || digits > 18 || (b[start] == '0' && digits > 1) {
		return 0, 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, 0, false
	}
	if neg {
		n = -n
	}
	return n, i, true
}

// modelOf reads a JSON string as json.Unmarshal into a string does (empty
// when it cannot). A string without escapes or control characters in
// valid UTF-8, as every upstream sends a model's name, is read in place.
func modelOf(v []byte) string {
	if len(v) >= 2 && v[0] == '"' {
		s := v[1 : len(v)-1]
		plain := v[len(v)-1] == '"'
		for _, c := range s {
			if c < 0x20 || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
		if plain && utf8.Valid(s) {
			return string(s)
		}
	}
	var m string
	if v != nil && json.Unmarshal(v, &m) == nil {
		return m
	}
	return ""
}

// member returns the JSON value of the last member named key (quoted) in
// raw: the top-level usage and model members follow the vectors in every
// known upstream's body. The value is only delimited here, not checked:
// callers decode it as json.Unmarshal would, which refuses one that is not
// JSON.
func member(raw, key []byte) []byte {
	i := lastKey(raw, key)
	if i < 0 {
		return nil
	}
	return valueAfter(raw, i+len(key))
}

// lastKey is bytes.LastIndex(raw, key) for a key that starts with a
// quote, found by stepping back from quote to quote: cheaper than
// bytes.LastIndex when the key is near the end, as usage and model are.
func lastKey(raw, key []byte) int {
	for end := len(raw); ; {
		i := bytes.LastIndexByte(raw[:end], '"')
		if i < 0 || bytes.HasPrefix(raw[i:], key) {
			return i
		}
		end = i
	}
}

// valueAfter returns the value that follows a key ending at raw[i]: after
// whitespace, a colon and whitespace; nil when there is none.
func valueAfter(raw []byte, i int) []byte {
	j := jsonscan.SkipSpace(raw, i)
	if j >= len(raw) || raw[j] != ':' {
		return nil
	}
	j = jsonscan.SkipSpace(raw, j+1)
	if j >= len(raw) {
		return nil
	}
	return raw[j:jsonscan.ValueEnd(raw, j)]
}
