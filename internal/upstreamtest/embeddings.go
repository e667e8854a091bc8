package upstreamtest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
)

const msgInvalidInput = "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."

// Vector returns the embedding the fake answers for input with dims
// dimensions: deterministic pseudo-random values derived from input,
// normalized to length 1 like OpenAI's. As with OpenAI's shortened
// embeddings, Vector(s, k) is Vector(s, n)[:k] renormalized, for k <= n.
func Vector(input string, dims int) []float32 {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(input); i++ {
		h ^= uint64(input[i])
		h *= 1099511628211
	}
	return vectorFromSeed(h, dims)
}

// TokenVector returns the embedding the fake answers for an input given as
// an array of token ids.
func TokenVector(tokens []int, dims int) []float32 {
	h := uint64(14695981039346656037) ^ 0x746f6b656e73 // distinct from strings
	for _, t := range tokens {
		for k := 0; k < 8; k++ {
			h ^= uint64(t>>(8*k)) & 0xff
			h *= 1099511628211
		}
	}
	return vectorFromSeed(h, dims)
}

// vectorFromSeed expands seed with SplitMix64 into dims values in [-1, 1)
// and normalizes them.
func vectorFromSeed(seed uint64, dims int) []float32 {
	if dims <= 0 {
		return nil
	}
	raw := make([]float64, dims)
	var sum float64
	state := seed
	for i := range raw {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		x := float64(z>>11)/(1<<53)*2 - 1
		raw[i] = x
		sum += float64(x * x)
	}
	norm := math.Sqrt(sum)
	v := make([]float32, dims)
	for i, x := range raw {
		v[i] = float32(x / norm)
	}
	return v
}

// embeddingsRequest holds the fields of an embeddings request.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// embeddingInput is one input of an embeddings request: a text or tokens.
type embeddingInput struct {
	text   string
	tokens []int
	isTok  bool
}

func (in embeddingInput) vector(dims int) []float32 {
	if in.isTok {
		return TokenVector(in.tokens, dims)
	}
	return Vector(in.text, dims)
}

func (in embeddingInput) tokenCount() int {
	if in.isTok {
		return len(in.tokens)
	}
	return Tokens(in.text)
}

// parseEmbeddingInput accepts a string, an array of strings, an array of
// token ids, or an array of arrays of token ids.
func parseEmbeddingInput(raw json.RawMessage) ([]embeddingInput, bool) {
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []embeddingInput{{text: s}}, s != ""
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		ins := make([]embeddingInput, len(ss))
		for i, s := range ss {
			if s == "" {
				return nil, false
			}
			ins[i] = embeddingInput{text: s}
		}
		return ins, len(ins) > 0
	}
	var toks []int
	if json.Unmarshal(raw, &toks) == nil {
		return []embeddingInput{{tokens: toks, isTok: true}}, len(toks) > 0
	}
	var batches [][]int
	if json.Unmarshal(raw, &batches) == nil {
		ins := make([]embeddingInput, len(batches))
		for i, t := range batches {
			if len(t) == 0 {
				return nil, false
			}
			ins[i] = embeddingInput{tokens: t, isTok: true}
		}
		return ins, len(ins) > 0
	}
	return nil, false
}

// serveEmbeddings answers POST /v1/embeddings.
func (s *Server) serveEmbeddings(o *output, body []byte) {
	var req embeddingsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAIBadJSON))
		return
	}
	dims := s.cfg.dims
	if req.Dimensions != nil {
		dims = *req.Dimensions
		if dims < 1 {
			o.sendJSON(http.StatusBadRequest, invalidRequest("", "",
				strconv.Itoa(dims)+" is less than the minimum of 1 - 'dimensions'"))
			return
		}
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "",
			"'"+req.EncodingFormat+"' is not one of ['float', 'base64'] - 'encoding_format'"))
		return
	}
	if req.Model == "" {
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAINoModel))
		return
	}
	if len(trimSpace(req.Input)) == 0 {
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", "'input' is a required property"))
		return
	}
	inputs, ok := parseEmbeddingInput(req.Input)
	if !ok {
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgInvalidInput))
		return
	}

	per := 12 * dims // a float32 in JSON takes up to about 12 bytes
	if b64 {
		per = (4*dims + 2) / 3 * 4
	}
	b := make([]byte, 0, 128+len(inputs)*(per+48))
	b = append(b, `{"object":"list","data":[`...)
	tokens := 0
	for i, in := range inputs {
		tokens += in.tokenCount()
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = appendInt(b, i)
		b = append(b, `,"embedding":`...)
		b = append(b, s.encodedVector(in, dims, b64)...)
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = appendInt(b, tokens)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, tokens)
	b = append(b, "}}"...)
	o.sendJSON(http.StatusOK, b)
}

// vectorKey names an encoded vector in the server's cache.
type vectorKey struct {
	input string
	dims  int
	b64   bool
}

// maxCachedVectors bounds the cache of encoded vectors.
const maxCachedVectors = 4096

// encodedVector returns the JSON value of an input's vector (a float array,
// or a base64 string of little-endian float32s). Vectors are deterministic,
// so each is encoded once and kept: like a real upstream, the fake answers
// without spending the CPU a benchmark means to measure elsewhere.
func (s *Server) encodedVector(in embeddingInput, dims int, b64 bool) []byte {
	key := vectorKey{input: in.text, dims: dims, b64: b64}
	if in.isTok {
		key.input = "\x00tokens:" + fmt.Sprint(in.tokens)
	}
	if v, ok := s.vectors.Load(key); ok {
		return v.([]byte)
	}
	v := in.vector(dims)
	var b []byte
	if b64 {
		raw := make([]byte, 0, 4*len(v))
		for _, x := range v {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		b = append(b, '"')
	} else {
		b = append(b, '[')
		for j, x := range v {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, float64(x), 'f', -1, 32)
		}
		b = append(b, ']')
	}
	if s.cached.Add(1) <= maxCachedVectors {
		s.vectors.Store(key, b)
	}
	return b
}
