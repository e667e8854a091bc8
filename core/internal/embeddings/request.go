package embeddings

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// upstreamRequest is the upstream request body; appendRequest writes the
// bytes json.Marshal writes for it.
type upstreamRequest struct {
	Model          string `json:"model"`
	Input          any    `json:"input"`
	EncodingFormat string `json:"encoding_format"`
	Dimensions     *int32 `json:"dimensions,omitempty"`
	User           string `json:"user,omitempty"`
}

// appendRequest appends the upstream request body for model and the
// request's input, byte for byte what json.Marshal of upstreamRequest
// writes, without its reflection over an interface-typed input.
func appendRequest(b []byte, model string, req *Request, format string) []byte {
	b = append(b, `{"model":`...)
	b = appendString(b, model)
	b = append(b, `,"input":`...)
	switch {
	case req.Tokens != nil:
		b = append(b, '[')
		for i, toks := range req.Tokens {
			if i > 0 {
				b = append(b, ',')
			}
			if toks == nil {
				b = append(b, "null"...)
				continue
			}
			b = append(b, '[')
			for j, t := range toks {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, t, 10)
			}
			b = append(b, ']')
		}
		b = append(b, ']')
	case req.Texts != nil:
		b = append(b, '[')
		for i, s := range req.Texts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	default:
		b = append(b, "null"...)
	}
	b = append(b, `,"encoding_format":`...)
	b = appendString(b, format)
	if req.Dimensions != nil {
		b = append(b, `,"dimensions":`...)
		b = strconv.AppendInt(b, int64(*req.Dimensions), 10)
	}
	if req.User != "" {
		b = append(b, `,"user":`...)
		b = appendString(b, req.User)
	}
	if inner := members(req.Extra); len(inner) > 0 {
		b = append(append(b, ','), inner...)
	}
	return append(b, '}')
}

// members is the inside of a JSON object (what lies between its braces,
// without the blanks around it), nil for an empty one.
func members(obj []byte) []byte {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 {
		return nil
	}
	return bytes.TrimSpace(obj[1 : len(obj)-1])
}

// ValidExtra checks a request's extra members: a JSON object none of whose
// keys is one the request's own fields write (in any case, as decoders
// such as encoding/json match keys), so that the upstream reads each field
// once. It returns the offending key, or "" with an error for what is not
// an object.
func ValidExtra(extra []byte) (key string, err error) {
	if len(extra) == 0 {
		return "", nil
	}
	if !json.Valid(extra) {
		return "", errors.New("extra members are not valid JSON")
	}
	var bad string
	if !jsonscan.Members(extra, func(k, _ []byte) bool {
		for _, own := range contract.EmbeddingsMembers {
			if strings.EqualFold(string(k), own) {
				bad = string(k)
				return false
			}
		}
		return true
	}) {
		return "", errors.New("extra members are not a JSON object")
	}
	return bad, nil
}

// requestSize is about how long the request body is, to size its buffer.
func requestSize(model string, req *Request) int {
	n := 96 + len(model) + len(req.User) + len(req.Extra)
	for _, s := range req.Texts {
		n += len(s) + 3
	}
	for _, t := range req.Tokens {
		n += 2 + 7*len(t)
	}
	return n
}

// appendString appends s as json.Marshal quotes it: printable ASCII that
// needs no escape is copied as it is, any other string goes through
// json.Marshal (which escapes HTML characters, control characters and
// U+2028/U+2029, and replaces invalid UTF-8).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
