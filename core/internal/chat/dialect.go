package chat

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/core/internal/translate"
	"github.com/switchboardhq/switchboard/internal/jsonscan"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Dialect is the API shape a client speaks.
type Dialect int

const (
	// DialectChat is OpenAI Chat Completions (/v1/chat/completions).
	DialectChat Dialect = iota
	// DialectMessages is Anthropic Messages (/v1/messages).
	DialectMessages
	// DialectResponses is OpenAI Responses (/v1/responses).
	DialectResponses
)

func (d Dialect) String() string {
	switch d {
	case DialectMessages:
		return "messages"
	case DialectResponses:
		return "responses"
	}
	return "chat.completions"
}

// inbound is what the gateway reads of a client's body; the rest passes
// through to the translator untouched.
type inbound struct {
	dialect      Dialect
	body         []byte
	fields       map[string]json.RawMessage
	model        string
	stream       bool
	includeUsage bool
	header       map[string]string
	// history is a Responses request's whole conversation as input items
	// (a stored predecessor's included), kept with its answer.
	history []json.RawMessage
	// echo is what a translated Responses answer repeats of the request, as
	// the client sent it (read before a stored predecessor is folded in).
	echo translate.Echo
	// previous is the JSON string of the response a Responses request
	// continues (previous_response_id), which the gateway folds in and a
	// Responses upstream never sees; nil when it continues none.
	previous json.RawMessage
}

// parse reads the fields every dialect shares (model, stream) and checks the
// one that must be there (messages, or input).
func parse(d Dialect, body []byte) (inbound, error) {
	in := inbound{dialect: d, body: body}
	// The edge's HTTP routes refuse such bodies before they call core: a
	// gRPC caller's come as sent.
	if !utf8.Valid(body) {
		return in, &RequestError{Code: "invalid_encoding", Message: "the request body is not valid UTF-8"}
	}
	// The members are read in place: their values alias body, which is
	// never changed.
	if validJSON(body) {
		fields := make(map[string]json.RawMessage, 8) // one group: most bodies have fewer members
		if jsonscan.Members(body, func(k, v []byte) bool {
			fields[string(k)] = v
			return true
		}) {
			in.fields = fields
		}
	}
	if in.fields == nil {
		return in, &RequestError{Code: "invalid_json", Message: "the request body is not a JSON object"}
	}
	if jsonscan.LoneSurrogate(body) {
		return in, &RequestError{Code: "invalid_encoding", Message: "the request body holds a lone UTF-16 surrogate escape"}
	}
	raw, ok := in.fields["model"]
	if !ok || string(raw) == "null" {
		return in, missing(d, "model")
	}
	if !unquote(raw, &in.model) || in.model == "" {
		return in, &RequestError{Param: "model", Code: "invalid_type", Message: "'model' must be a non-empty string"}
	}
	if s, ok := in.fields["stream"]; ok && string(s) != "null" {
		if !readBool(s, &in.stream) {
			return in, &RequestError{Param: "stream", Code: "invalid_type", Message: "'stream' must be a boolean"}
		}
	}
	switch d {
	case DialectResponses:
		input, ok := in.fields["input"]
		if !ok || string(input) == "null" {
			return in, &RequestError{Param: "input", Code: "missing_required_parameter", Message: "you must provide an input parameter"}
		}
		if input[0] != '"' && input[0] != '[' {
			return in, &RequestError{Param: "input", Code: "invalid_type", Message: "'input' must be a string or an array of items"}
		}
		in.echo = translate.EchoFrom(in.fields)
		return in, nil
	case DialectMessages:
		if err := requireList(d, in.fields, "messages"); err != nil {
			return in, err
		}
		mt, ok := in.fields["max_tokens"]
		var n int64
		if !ok || string(mt) == "null" {
			return in, missing(d, "max_tokens")
		}
		if json.Unmarshal(mt, &n) != nil || n < 1 {
			return in, &RequestError{Param: "max_tokens", Code: "invalid_value", Message: "max_tokens: must be a positive integer"}
		}
		return in, boundList(in.fields, "stop_sequences", contract.MaxMessagesStop)
	}
	if err := requireList(d, in.fields, "messages"); err != nil {
		return in, err
	}
	if err := boundList(in.fields, "stop", contract.MaxChatStop); err != nil {
		return in, err
	}
	if so, ok := in.fields["stream_options"]; ok && string(so) != "null" {
		var opts struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if json.Unmarshal(so, &opts) != nil {
			return in, &RequestError{Param: "stream_options", Code: "invalid_type", Message: "'stream_options' must be an object"}
		}
		in.includeUsage = opts.IncludeUsage
	}
	return in, nil
}

// unquote decodes a raw value of the body (valid JSON) into a string, as
// json.Unmarshal does; a plain string, with no escapes and valid UTF-8, is
// read without it.
func unquote(raw []byte, s *string) bool {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		*s = string(raw[1 : n-1])
		return true
	}
	return json.Unmarshal(raw, s) == nil
}

// readBool decodes a raw value of the body (valid JSON) into a bool, as
// json.Unmarshal does.
func readBool(raw []byte, b *bool) bool {
	switch string(raw) {
	case "true":
		*b = true
		return true
	case "false":
		*b = false
		return true
	}
	return json.Unmarshal(raw, b) == nil
}

// missing is the refusal of a request without a member it needs (absent or
// null), in its dialect's words: Anthropic's on the Messages dialect
// ("messages: Field required"), OpenAI's on the others.
func missing(d Dialect, name string) *RequestError {
	msg := "you must provide a " + name + " parameter"
	if d == DialectMessages {
		msg = name + ": Field required"
	}
	return &RequestError{Param: name, Code: "missing_required_parameter", Message: msg}
}

func requireList(d Dialect, fields map[string]json.RawMessage, name string) error {
	msgs, ok := fields[name]
	if !ok || string(msgs) == "null" {
		return missing(d, name)
	}
	n := 0
	if !jsonscan.Elements(msgs, func([]byte) bool {
		n++
		return false // one is enough
	}) {
		return &RequestError{Param: name, Code: "invalid_type", Message: "'" + name + "' must be an array"}
	}
	if n == 0 {
		return &RequestError{Param: name, Code: contract.CodeEmptyArray, Message: contract.EmptyArray(name)}
	}
	return nil
}

// boundList refuses a list member holding more than max items, as the
// edge's checks do (a gRPC caller reaches core without them), in OpenAI's
// code and words; a member that is absent or not a list is left to the
// code that reads it.
func boundList(fields map[string]json.RawMessage, name string, max int) error {
	raw, ok := fields[name]
	if !ok || len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	n := 0
	jsonscan.Elements(raw, func([]byte) bool {
		n++
		return true // all of them: the refusal says how many
	})
	if n > max {
		return &RequestError{Param: name, Code: contract.CodeArrayAboveMaxLength, Message: contract.ArrayAboveMaxLength(name, max, n)}
	}
	return nil
}

// withFields re-encodes the client's fields with some replaced: the
// pass-through body (only the model, and what the gateway must ask for,
// differ from the client's). The bytes are what json.Marshal makes of the
// merged map[string]json.RawMessage (members sorted by key, values
// compacted, HTML characters escaped), written without reflection.
func (in inbound) withFields(set map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(in.fields)+len(set))
	for k := range in.fields {
		if _, ok := set[k]; !ok {
			keys = append(keys, k)
		}
	}
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	size := 2
	for _, v := range set {
		size += len(v) + 32
	}
	out := make([]byte, 0, len(in.body)+size)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendKey(out, k)
		out = append(out, ':')
		// The client's values are valid JSON (parse checked the body); a
		// replacement is checked here, as json.Marshal would.
		v, ok := set[k]
		if !ok {
			v = in.fields[k]
		} else if v != nil && !json.Valid(v) {
			return json.Marshal(map[string]json.RawMessage{k: v})
		}
		if v == nil {
			out = append(out, "null"...)
			continue
		}
		out = appendCompactHTML(out, v)
	}
	return append(out, '}'), nil
}

// appendKey appends k as a JSON string the way encoding/json writes a map
// key.
func appendKey(dst []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(k)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendCompactHTML appends the valid JSON value v as json.Marshal writes a
// json.RawMessage: spaces between tokens dropped, and <, >, &, U+2028 and
// U+2029 (which occur only inside strings) escaped.
func appendCompactHTML(dst, v []byte) []byte {
	start := 0
	inString, escaped := false, false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !inString {
			switch c {
			case '"':
				inString = true
			case ' ', '\t', '\n', '\r':
				dst = append(dst, v[start:i]...)
				start = i + 1
			}
			continue
		}
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inString = false
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8:
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[v[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}
