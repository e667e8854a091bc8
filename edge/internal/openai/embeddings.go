package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Embeddings serves POST /v1/embeddings and POST /{machineId}/v1/embeddings.
type Embeddings struct {
	Router corev1.RouterClient
	// Upstream records time core spent waiting upstream (for the overhead
	// header).
	Upstream func(r *http.Request, us int64)
}

func (h *Embeddings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSON(w, r)
	if !ok {
		return
	}
	req, p := ParseEmbeddings(body)
	if p != nil {
		p.Write(w)
		return
	}
	req.RawJson = true
	ctx, id := Outgoing(r)
	var header metadata.MD
	resp, err := h.Router.CreateEmbeddings(ctx, req, grpc.Header(&header))
	if us, ok := UpstreamMicros(header); ok && h.Upstream != nil {
		h.Upstream(r, us)
	}
	w.Header().Set("X-Request-Id", id)
	if err != nil {
		FromError(err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(resp.GetJson())))
	_, _ = w.Write(resp.GetJson())
}

// presizeMax is the largest declared length readAll allocates up front; a
// larger body grows as it arrives, so a client cannot make the edge hold
// memory it never sends (the body guard counts bytes as they are read: a
// slow client declaring a megabyte would otherwise hold one it has not
// sent).
const presizeMax = 64 << 10

// readAll reads a request body under the edge's limits. A body that
// declares its length is read into one buffer of that size (plus one byte,
// so the read that finds the end does not grow it) instead of growing
// from 512 bytes.
func readAll(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	n := r.ContentLength
	if n <= 0 || n > presizeMax {
		return io.ReadAll(r.Body)
	}
	b := make([]byte, 0, n+1)
	for {
		m, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than declared: grow
		}
	}
}

// embeddingsBody is the request body with each member kept raw, so every
// type error gets its own message.
type embeddingsBody struct {
	Model          json.RawMessage `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat json.RawMessage `json:"encoding_format"`
	Dimensions     json.RawMessage `json:"dimensions"`
	User           json.RawMessage `json:"user"`
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// ParseEmbeddings validates an embeddings body (interface 2.2 and 7) and
// returns the gRPC request, or the 400 to answer.
func ParseEmbeddings(body []byte) (*corev1.CreateEmbeddingsRequest, *Problem) {
	bad := func(code, msg, param string) (*corev1.CreateEmbeddingsRequest, *Problem) {
		p := NewProblem(http.StatusBadRequest, code, msg, param)
		return nil, &p
	}
	if p := CheckJSON(body); p != nil {
		return nil, p
	}
	var b embeddingsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return bad("invalid_json", "the request body is not valid JSON", "")
	}
	req := &corev1.CreateEmbeddingsRequest{}
	if isNull(b.Model) {
		return bad("missing_required_parameter", "you must provide a model parameter", "model")
	}
	if json.Unmarshal(b.Model, &req.Model) != nil || req.Model == "" {
		return bad("invalid_type", "'model' must be a non-empty string", "model")
	}
	if isNull(b.Input) {
		return bad("missing_required_parameter", "you must provide an input parameter", "input")
	}
	if p := parseInput(b.Input, req); p != nil {
		return nil, p
	}
	if !isNull(b.EncodingFormat) {
		var f string
		if json.Unmarshal(b.EncodingFormat, &f) != nil || (f != "float" && f != "base64") {
			return bad("invalid_value", "'encoding_format' must be 'float' or 'base64'", "encoding_format")
		}
		req.EncodingFormat = f
	} else {
		req.EncodingFormat = "float"
	}
	if !isNull(b.Dimensions) {
		var d int32
		if json.Unmarshal(b.Dimensions, &d) != nil || d < 1 {
			return bad("invalid_value", "'dimensions' must be a positive integer", "dimensions")
		}
		req.Dimensions = &d
	}
	if !isNull(b.User) && json.Unmarshal(b.User, &req.User) != nil {
		return bad("invalid_type", "'user' must be a string", "user")
	}
	return req, nil
}

// parseInput accepts a string, an array of strings, an array of token ids,
// or an array of token arrays.
func parseInput(raw json.RawMessage, req *corev1.CreateEmbeddingsRequest) *Problem {
	bad := func(code, msg string) *Problem {
		p := NewProblem(http.StatusBadRequest, code, msg, "input")
		return &p
	}
	const shape = "'input' must be a string, an array of strings, an array of token ids, or an array of token arrays"
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return bad("invalid_value", "'input' must not be empty")
		}
		req.Texts = []string{s}
		return nil
	}
	if n, ok := countItems(raw, MaxEmbeddingInputs); ok && n > MaxEmbeddingInputs {
		return bad("array_too_long", "'input' holds more than "+strconv.Itoa(MaxEmbeddingInputs)+" items")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return bad("invalid_type", shape)
	}
	if len(items) == 0 {
		return bad("invalid_value", "'input' must not be an empty array")
	}
	switch bytes.TrimSpace(items[0])[0] {
	case '"':
		req.Texts = make([]string, len(items))
		for i, it := range items {
			if json.Unmarshal(it, &req.Texts[i]) != nil {
				return bad("invalid_type", shape)
			}
			if req.Texts[i] == "" {
				return bad("invalid_value", "'input' must not hold empty strings")
			}
		}
	case '[':
		req.Tokens = make([]*corev1.TokenList, len(items))
		for i, it := range items {
			if n, _ := countItems(it, MaxEmbeddingTokens); n > MaxEmbeddingTokens {
				return bad("array_too_long", "a token array of 'input' holds more than "+strconv.Itoa(MaxEmbeddingTokens)+" ids")
			}
			var toks []int64
			if json.Unmarshal(it, &toks) != nil {
				return bad("invalid_type", shape)
			}
			if len(toks) == 0 {
				return bad("invalid_value", "'input' must not hold empty token arrays")
			}
			req.Tokens[i] = &corev1.TokenList{Tokens: toks}
		}
	default:
		if len(items) > MaxEmbeddingTokens {
			return bad("array_too_long", "'input' holds more than "+strconv.Itoa(MaxEmbeddingTokens)+" token ids")
		}
		var toks []int64
		if json.Unmarshal(raw, &toks) != nil {
			return bad("invalid_type", shape)
		}
		req.Tokens = []*corev1.TokenList{{Tokens: toks}}
	}
	return nil
}
