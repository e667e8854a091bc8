package caveman

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrMalformedBody reports a body that is not JSON, or whose fields the
// injector needs have an unexpected type.
var ErrMalformedBody = errors.New("caveman: malformed request body")

// object is a JSON object kept as its members in source order, each value
// as its raw bytes, so that re-encoding changes only what was changed.
// Duplicate keys are kept; lookups use the last one, as Go's decoder and
// most others do.
type object []member

type member struct {
	key   string
	value json.RawMessage
}

// parseObject parses data, which must be a single JSON object. The decoder
// validates as it goes, so there is no separate validation pass: a body may
// carry megabytes of base64 images, and each pass over it costs.
func parseObject(data []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformedBody)
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: object key is not a string", ErrMalformedBody)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
		}
		o = append(o, member{key: key, value: bytes.TrimSpace(v)})
	}
	if err := end(dec, '}'); err != nil {
		return nil, err
	}
	return o, nil
}

// parseArray parses a JSON array into its raw elements.
func parseArray(data json.RawMessage) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("%w: not a JSON array", ErrMalformedBody)
	}
	var a []json.RawMessage
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
		}
		a = append(a, bytes.TrimSpace(v))
	}
	if err := end(dec, ']'); err != nil {
		return nil, err
	}
	return a, nil
}

// end reads the closing delimiter and checks that nothing follows it.
func end(dec *json.Decoder, delim json.Delim) error {
	if tok, err := dec.Token(); err != nil || tok != delim {
		return fmt.Errorf("%w: unterminated %c", ErrMalformedBody, delim)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON value", ErrMalformedBody)
	}
	return nil
}

// role returns the "role" of a chat message without decoding the rest of
// it when role comes first, as it does from every SDK: the content after it
// may be a large image. With duplicate role keys the first one counts.
func role(msg json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if tok == "role" {
			var r string
			if err := dec.Decode(&r); err != nil {
				return ""
			}
			return r
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// get returns the value of the last member named key.
func (o object) get(key string) (json.RawMessage, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].key == key {
			return o[i].value, true
		}
	}
	return nil, false
}

// set replaces the value of the last member named key, or appends a member.
func (o *object) set(key string, value json.RawMessage) {
	for i := len(*o) - 1; i >= 0; i-- {
		if (*o)[i].key == key {
			(*o)[i].value = value
			return
		}
	}
	*o = append(*o, member{key: key, value: value})
}

func (o object) marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encodeString(m.key))
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// marshalArray joins raw elements without re-encoding them (json.Marshal
// would compact them and escape HTML characters).
func marshalArray(a []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(v)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// kind is the JSON type of a raw value, by its first byte.
type kind byte

const (
	kindOther kind = iota
	kindNull
	kindString
	kindArray
	kindObject
)

func kindOf(v json.RawMessage) kind {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return kindOther
	}
	switch v[0] {
	case 'n':
		return kindNull
	case '"':
		return kindString
	case '[':
		return kindArray
	case '{':
		return kindObject
	}
	return kindOther
}

// stringValue decodes a raw JSON string.
func stringValue(v json.RawMessage) (string, bool) {
	if kindOf(v) != kindString {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// encodeString encodes s as a JSON string without HTML escaping, so that
// text the client sent keeps its characters.
func encodeString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// textPart is the {"type":"text","text":...} element both OpenAI content
// parts and Anthropic system blocks use.
func textPart(text string) json.RawMessage {
	return json.RawMessage(`{"type":"text","text":` + string(encodeString(text)) + `}`)
}

// appendText appends prompt to a string value, separated by a blank line
// unless the string is empty.
func appendText(s, prompt string) json.RawMessage {
	if s == "" {
		return encodeString(prompt)
	}
	return encodeString(s + "\n\n" + prompt)
}
