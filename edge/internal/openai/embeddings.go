package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
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
	req, p := parseEmbeddings(body) // readJSON checked the body
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
		FromError(shutdownOr(r, err)).Write(w)
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
	// Extra is a JSON object of the body's other members (provider-specific
	// ones, such as input_type), in their order; nil when there are none.
	Extra []byte `json:"-"`
}

// addExtra appends a member to b.Extra.
func (b *embeddingsBody) addExtra(key, value []byte) {
	if b.Extra == nil {
		b.Extra = append(make([]byte, 0, len(key)+len(value)+8), '{')
	} else {
		b.Extra[len(b.Extra)-1] = ','
	}
	k, _ := json.Marshal(string(key)) // a string always marshals
	b.Extra = append(append(b.Extra, k...), ':')
	b.Extra = append(append(b.Extra, value...), '}')
}

// split reads the members of a body CheckJSON accepted into b, in place,
// as json.Unmarshal does (the last of a repeated member wins), and the
// members the gateway does not read into b.Extra; false, for
// json.Unmarshal to read the members instead, when a key is one of the
// members' names in another case (json.Unmarshal matches keys without
// regard to case) or the body is not an object.
func (b *embeddingsBody) split(body []byte) bool {
	known := true
	ok := jsonscan.Members(body, func(key, value []byte) bool {
		switch string(key) {
		case "model":
			b.Model = value
		case "input":
			b.Input = value
		case "encoding_format":
			b.EncodingFormat = value
		case "dimensions":
			b.Dimensions = value
		case "user":
			b.User = value
		default:
			if jsonscan.FoldsTo(key, contract.EmbeddingsMembers...) {
				known = false
			} else {
				b.addExtra(key, value)
			}
		}
		return true
	})
	return ok && known
}

// unmarshalBody reads a body split refused (only here: json.Unmarshal's
// target escapes).
func unmarshalBody(body []byte) (embeddingsBody, error) {
	var b embeddingsBody
	err := json.Unmarshal(body, &b)
	return b, err
}

// jsonString is json.Unmarshal of raw, a value of a body CheckJSON
// accepted, into a string: a string without escapes is that string as it
// is. ok is false when json.Unmarshal fails.
func jsonString(raw []byte) (s string, ok bool) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 {
		return string(raw[1 : n-1]), true
	}
	var v string // only here: json.Unmarshal's target escapes
	err := json.Unmarshal(raw, &v)
	return v, err == nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// parseEmbeddings validates an embeddings body CheckJSON accepted
// (interface 2.2 and 7) and returns the gRPC request, or the 400 to answer.
func parseEmbeddings(body []byte) (*corev1.CreateEmbeddingsRequest, *Problem) {
	bad := func(code, msg, param string) (*corev1.CreateEmbeddingsRequest, *Problem) {
		p := NewProblem(http.StatusBadRequest, code, msg, param)
		return nil, &p
	}
	var b embeddingsBody
	if !b.split(body) {
		extra := b.Extra
		var err error
		if b, err = unmarshalBody(body); err != nil {
			return bad("invalid_json", "the request body is not valid JSON", "")
		}
		b.Extra = extra
	}
	req := &corev1.CreateEmbeddingsRequest{}
	if isNull(b.Model) {
		return bad("missing_required_parameter", "you must provide a model parameter", "model")
	}
	var ok bool
	if req.Model, ok = jsonString(b.Model); !ok || req.Model == "" {
		return bad("invalid_type", "'model' must be a non-empty string", "model")
	}
	if isNull(b.Input) {
		return bad("missing_required_parameter", "you must provide an input parameter", "input")
	}
	if p := parseInput(b.Input, req); p != nil {
		return nil, p
	}
	if !isNull(b.EncodingFormat) {
		switch f, _ := jsonString(b.EncodingFormat); f {
		case "float", "base64":
			req.EncodingFormat = f
		default:
			return bad("invalid_value", "'encoding_format' must be 'float' or 'base64'", "encoding_format")
		}
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
	if !isNull(b.User) {
		if req.User, ok = jsonString(b.User); !ok {
			return bad("invalid_type", "'user' must be a string", "user")
		}
	}
	req.ExtraJson = b.Extra
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
	if raw[0] == '"' { // not null: a string, which json.Unmarshal always reads, or no string
		s, _ := jsonString(raw)
		if s == "" {
			return bad("invalid_value", "'input' must not be empty")
		}
		req.Texts = []string{s}
		return nil
	}
	if n, ok := countItems(raw, MaxEmbeddingInputs); ok && n > MaxEmbeddingInputs {
		return arrayTooLong("input", MaxEmbeddingInputs, raw)
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
			var ok bool
			if req.Texts[i], ok = jsonString(it); !ok {
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
				return arrayTooLong("input["+strconv.Itoa(i)+"]", MaxEmbeddingTokens, it)
			}
			var toks []int64
			if json.Unmarshal(it, &toks) != nil || hasNull(it) {
				return bad("invalid_type", shape)
			}
			if len(toks) == 0 {
				return bad("invalid_value", "'input' must not hold empty token arrays")
			}
			req.Tokens[i] = &corev1.TokenList{Tokens: toks}
		}
	default:
		if len(items) > MaxEmbeddingTokens {
			return arrayTooLong("input", MaxEmbeddingTokens, raw)
		}
		var toks []int64
		if json.Unmarshal(raw, &toks) != nil || hasNull(raw) {
			return bad("invalid_type", shape)
		}
		req.Tokens = []*corev1.TokenList{{Tokens: toks}}
	}
	return nil
}

// hasNull reports whether an array that decoded as token ids held a null,
// which decoding reads as id 0: once it decoded, it holds only numbers and
// nulls, and no number is spelt with an n.
func hasNull(arr []byte) bool { return bytes.IndexByte(arr, 'n') >= 0 }
