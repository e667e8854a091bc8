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
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, errBadBody
	}
	return v, nil
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

// hasShape reports, without decoding the vectors, whether a body is an
// OpenAI embeddings list in the wanted format with usage: the first
// "embedding" member holds an array (float) or a string (base64).
func hasShape(raw []byte, format string) bool {
	if !bytes.Contains(raw, []byte(`"usage"`)) || !bytes.Contains(raw, []byte(`"data"`)) {
		return false
	}
	rest := raw
	for {
		i := bytes.Index(rest, []byte(`"embedding"`))
		if i < 0 {
			return false
		}
		rest = rest[i+len(`"embedding"`):]
		j := skipSpace(rest, 0)
		if j >= len(rest) || rest[j] != ':' {
			continue // a value such as "object":"embedding"
		}
		j = skipSpace(rest, j+1)
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

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// peekUsage reads the usage object without decoding the rest of the body.
func peekUsage(raw []byte) (prompt, total int64) {
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

// peekModel reads the top-level model member (it follows the data array).
func peekModel(raw []byte) string {
	var m string
	if v := member(raw, "model"); v != nil && json.Unmarshal(v, &m) == nil {
		return m
	}
	return ""
}

// member returns the JSON value of the last member named name in raw: the
// top-level usage and model members follow the vectors in every known
// upstream's body. The value is only delimited here, not checked: callers
// decode it with json.Unmarshal, which refuses one that is not JSON.
func member(raw []byte, name string) []byte {
	key := []byte(`"` + name + `"`)
	i := bytes.LastIndex(raw, key)
	if i < 0 {
		return nil
	}
	j := skipSpace(raw, i+len(key))
	if j >= len(raw) || raw[j] != ':' {
		return nil
	}
	j = skipSpace(raw, j+1)
	if j >= len(raw) {
		return nil
	}
	return raw[j:valueEnd(raw, j)]
}

// valueEnd returns where the JSON value that starts at raw[i] ends, when it
// is valid: after its closing quote or bracket, or at the delimiter after a
// number or literal.
func valueEnd(raw []byte, i int) int {
	depth := 0
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return min(i+1, len(raw))
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth <= 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return len(raw)
}
