package chat

import (
	"encoding/json"
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
}

// parse reads the fields every dialect shares (model, stream) and checks the
// one that must be there (messages, or input).
func parse(d Dialect, body []byte) (inbound, error) {
	in := inbound{dialect: d, body: body}
	// The members are read in place: their values alias body, which is
	// never changed.
	if json.Valid(body) {
		fields := make(map[string]json.RawMessage, 16)
		if members(body, func(k, v []byte) bool {
			fields[string(k)] = v
			return true
		}) {
			in.fields = fields
		}
	}
	if in.fields == nil {
		return in, &RequestError{Code: "invalid_json", Message: "the request body is not a JSON object"}
	}
	raw, ok := in.fields["model"]
	if !ok || string(raw) == "null" {
		return in, &RequestError{Param: "model", Code: "missing_required_parameter", Message: "you must provide a model parameter"}
	}
	if json.Unmarshal(raw, &in.model) != nil || in.model == "" {
		return in, &RequestError{Param: "model", Code: "invalid_type", Message: "'model' must be a non-empty string"}
	}
	if s, ok := in.fields["stream"]; ok && string(s) != "null" {
		if json.Unmarshal(s, &in.stream) != nil {
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
		return in, nil
	case DialectMessages:
		if err := requireList(in.fields, "messages"); err != nil {
			return in, err
		}
		mt, ok := in.fields["max_tokens"]
		var n int64
		if !ok || string(mt) == "null" {
			return in, &RequestError{Param: "max_tokens", Code: "missing_required_parameter", Message: "max_tokens: Field required"}
		}
		if json.Unmarshal(mt, &n) != nil || n < 1 {
			return in, &RequestError{Param: "max_tokens", Code: "invalid_value", Message: "max_tokens: must be a positive integer"}
		}
		return in, nil
	}
	if err := requireList(in.fields, "messages"); err != nil {
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

func requireList(fields map[string]json.RawMessage, name string) error {
	msgs, ok := fields[name]
	if !ok || string(msgs) == "null" {
		return &RequestError{Param: name, Code: "missing_required_parameter", Message: "you must provide a " + name + " parameter"}
	}
	n := 0
	if !elements(msgs, func([]byte) bool {
		n++
		return false // one is enough
	}) {
		return &RequestError{Param: name, Code: "invalid_type", Message: "'" + name + "' must be an array"}
	}
	if n == 0 {
		return &RequestError{Param: name, Code: "invalid_value", Message: "'" + name + "' must not be empty"}
	}
	return nil
}

// withFields re-encodes the client's fields with some replaced: the
// pass-through body (only the model, and what the gateway must ask for,
// differ from the client's).
func (in inbound) withFields(set map[string]json.RawMessage) ([]byte, error) {
	fields := make(map[string]json.RawMessage, len(in.fields)+len(set))
	for k, v := range in.fields {
		fields[k] = v
	}
	for k, v := range set {
		fields[k] = v
	}
	return json.Marshal(fields)
}
