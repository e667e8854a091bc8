package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Bounds of the lists a JSON request may hold. OpenAI's own where it
// documents one (2,048 embeddings inputs, 128 tools, 4 stop sequences,
// n up to 128); generous elsewhere, since the body's size bounds the rest.
const (
	MaxEmbeddingInputs = contract.MaxEmbeddingInputs
	// MaxEmbeddingTokens caps one token-id input.
	MaxEmbeddingTokens = contract.MaxEmbeddingTokens
	MaxChatMessages    = 10_000
	MaxChatTools       = 128
	MaxChatStop        = contract.MaxChatStop
	MaxChatN           = 128
	// The Messages and Responses bounds. Anthropic documents none: the
	// Messages ones are generous (Claude Code with many MCP servers sends
	// hundreds of tools); Responses takes OpenAI's 128 tools.
	MaxMessagesMessages = 10_000
	MaxMessagesTools    = 1024
	MaxMessagesStop     = contract.MaxMessagesStop
	MaxMessagesSystem   = 10_000
	MaxResponsesInput   = 10_000
	MaxResponsesTools   = 128
)

// readJSON reads a JSON route's body: a browser's body must say it is
// JSON (a page may send text/plain without a preflight, never
// application/json), and the body must be well-formed UTF-8 JSON holding
// one object, nested at most 10,000 deep (encoding/json's bound). It
// answers the error itself when not, in the route's shape (WriteFor).
func readJSON(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Header.Get("Origin") != "" && !isJSONType(r.Header.Get("Content-Type")) {
		NewProblem(http.StatusUnsupportedMediaType, "invalid_content_type",
			"the request body must be application/json", "").WriteFor(w, r)
		return nil, false
	}
	body, err := readAll(r)
	if err != nil {
		BodyProblem(r, err).WriteFor(w, r)
		return nil, false
	}
	if p := CheckJSON(body); p != nil {
		p.WriteFor(w, r)
		return nil, false
	}
	return body, true
}

// isJSONType reports whether a Content-Type is application/json or a
// +json type.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || (len(mt) > 5 && mt[len(mt)-5:] == "+json"))
}

// CheckJSON is the 400 of a body that is not one well-formed JSON object
// in valid UTF-8, or nil.
func CheckJSON(body []byte) *Problem {
	if !utf8.Valid(body) {
		return badRequest("invalid_encoding", "the request body is not valid UTF-8", "")
	}
	if !json.Valid(body) {
		return badRequest("invalid_json", "the request body is not valid JSON (or is nested deeper than 10000 levels)", "")
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return badRequest("invalid_json", "the request body must be a JSON object", "")
	}
	if jsonscan.LoneSurrogate(body) {
		return badRequest("invalid_encoding", "the request body holds a lone UTF-16 surrogate escape", "")
	}
	return nil
}

// countItems counts the elements of a JSON array (raw must be valid JSON),
// stopping past max. ok is false when raw is not an array.
func countItems(raw []byte, max int) (n int, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' {
		return 0, false
	}
	depth, inStr, empty := 0, false, true
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			if depth == 1 {
				empty = false
			}
		case '[', '{':
			if depth == 1 {
				empty = false
			}
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				n++
				if n+1 > max {
					return n + 1, true
				}
			}
		case ' ', '\t', '\r', '\n':
		default:
			if depth == 1 {
				empty = false
			}
		}
	}
	if empty {
		return 0, true
	}
	return n + 1, true
}

// chatBounds are the members of a chat body whose size is bounded.
type chatBounds struct {
	Messages  json.RawMessage `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Functions json.RawMessage `json:"functions"`
	Stop      json.RawMessage `json:"stop"`
	N         json.RawMessage `json:"n"`
	Stream    json.RawMessage `json:"stream"`
}

// split reads the bounded members of a body CheckJSON accepted into b, in
// place, as json.Unmarshal does; false, for json.Unmarshal to read it
// instead, when a key matches a member's name only without regard to case.
func (b *chatBounds) split(body []byte) bool {
	plain := true
	ok := jsonscan.Members(body, func(key, value []byte) bool {
		switch string(key) {
		case "messages":
			b.Messages = value
		case "tools":
			b.Tools = value
		case "functions":
			b.Functions = value
		case "stop":
			b.Stop = value
		case "n":
			b.N = value
		case "stream":
			b.Stream = value
		default:
			plain = !jsonscan.FoldsTo(key, "messages", "tools", "functions", "stop", "n", "stream")
		}
		return plain
	})
	return ok && plain
}

// isTrue reports whether a member is the JSON true.
func isTrue(raw json.RawMessage) bool { return string(raw) == "true" }

// checkChat is the 400 of a well-formed chat body whose lists exceed their
// bounds (or whose messages are missing or not a list), or nil, and whether
// the body asks for a stream (stream: true; core refuses any other value
// that is not a boolean). The body is otherwise passed on as the client
// wrote it.
func checkChat(body []byte) (streamed bool, _ *Problem) {
	var b chatBounds
	if !b.split(body) {
		slow := new(chatBounds) // only here: json.Unmarshal's target escapes
		if err := json.Unmarshal(body, slow); err != nil {
			return false, badRequest("invalid_json", "the request body is not a valid chat request", "")
		}
		b = *slow
	}
	return b.check()
}

// check is checkChat's answer for the members read.
func (b *chatBounds) check() (streamed bool, _ *Problem) {
	if isNull(b.Messages) {
		return false, badRequest("missing_required_parameter", "you must provide a messages parameter", "messages")
	}
	n, ok := countItems(b.Messages, MaxChatMessages)
	switch {
	case !ok:
		return false, badRequest("invalid_type", "'messages' must be an array", "messages")
	case n == 0:
		return false, badRequest(contract.CodeEmptyArray, contract.EmptyArray("messages"), "messages")
	case n > MaxChatMessages:
		return false, arrayTooLong("messages", MaxChatMessages, b.Messages)
	}
	for _, l := range []struct {
		raw   json.RawMessage
		bound listBound
	}{
		{b.Tools, listBound{"tools", MaxChatTools, false}},
		{b.Functions, listBound{"functions", MaxChatTools, false}},
		{b.Stop, listBound{"stop", MaxChatStop, true}}, // or a single string
	} {
		if p := checkList(l.raw, l.bound); p != nil {
			return false, p
		}
	}
	if !isNull(b.N) {
		var n int64
		switch {
		case json.Unmarshal(b.N, &n) != nil:
			return false, badRequest("invalid_value", "'n' must be an integer from 1 to "+strconv.Itoa(MaxChatN), "n")
		case n < 1:
			return false, badRequest(contract.CodeIntegerBelowMinValue, contract.IntegerBelowMinValue("n", 1, n), "n")
		case n > MaxChatN:
			return false, badRequest(contract.CodeIntegerAboveMaxValue, contract.IntegerAboveMaxValue("n", MaxChatN, n), "n")
		}
	}
	return isTrue(b.Stream), nil
}

// listBound bounds one top-level list member of a request body.
type listBound struct {
	name string
	max  int
	// scalar: the member may also be a single value (a string), not
	// counted.
	scalar bool
}

// checkLists is the 400 of a well-formed body whose bounded lists exceed
// their bounds, or nil, and whether the body asks for a stream (stream:
// true). Members that are absent or null are not checked
// here (core says what is required).
func checkLists(body []byte, bounds ...listBound) (streamed bool, _ *Problem) {
	// The members bounded, then stream, read in place as a map would hold
	// them (keys unescaped, the last of a repeated key wins).
	var found [6][]byte // without an allocation for the usual few
	vals := found[:]
	if len(bounds) >= len(found) {
		vals = make([][]byte, len(bounds)+1)
	}
	object := jsonscan.Members(body, func(key, value []byte) bool {
		for i, l := range bounds {
			if string(key) == l.name {
				vals[i] = value
				return true
			}
		}
		if string(key) == "stream" {
			vals[len(bounds)] = value
		}
		return true
	})
	if !object {
		return false, badRequest("invalid_json", "the request body is not a JSON object", "")
	}
	for i, l := range bounds {
		if p := checkList(vals[i], l); p != nil {
			return false, p
		}
	}
	return isTrue(vals[len(bounds)]), nil
}

// checkList is the 400 of a list member over its bound, or not a list
// (unless a single value may stand for it); absent and null are fine.
func checkList(raw json.RawMessage, l listBound) *Problem {
	if isNull(raw) {
		return nil
	}
	n, ok := countItems(raw, l.max)
	switch {
	case !ok && l.scalar:
		return nil
	case !ok:
		return badRequest("invalid_type", "'"+l.name+"' must be an array", l.name)
	case n > l.max:
		return arrayTooLong(l.name, l.max, raw)
	}
	return nil
}

// arrayTooLong is the 400 of a list member holding more than max items, in
// OpenAI's code and words, which name how many it holds: counted to the
// end here, past the bound where the check stopped.
func arrayTooLong(name string, max int, raw []byte) *Problem {
	n, _ := countItems(raw, math.MaxInt)
	return badRequest(contract.CodeArrayAboveMaxLength, contract.ArrayAboveMaxLength(name, max, n), name)
}

// badRequest is a 400 Problem.
func badRequest(code, msg, param string) *Problem {
	p := NewProblem(http.StatusBadRequest, code, msg, param)
	return &p
}

// checkMessages bounds the lists of an Anthropic Messages (or
// count_tokens) body: messages, tools, stop_sequences and system blocks; and
// reports whether the body asks for a stream.
func checkMessages(body []byte) (bool, *Problem) {
	return checkLists(body,
		listBound{name: "messages", max: MaxMessagesMessages},
		listBound{name: "tools", max: MaxMessagesTools},
		listBound{name: "stop_sequences", max: MaxMessagesStop},
		listBound{name: "system", max: MaxMessagesSystem, scalar: true})
}

// checkResponses bounds the lists of a Responses body: input items and
// tools; and reports whether the body asks for a stream.
func checkResponses(body []byte) (bool, *Problem) {
	return checkLists(body,
		listBound{name: "input", max: MaxResponsesInput, scalar: true},
		listBound{name: "tools", max: MaxResponsesTools})
}
