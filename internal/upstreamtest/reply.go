package upstreamtest

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EchoPrefix starts the text of every chat answer: the fake answers
// EchoPrefix + the text of the last user message (or, when the conversation
// ends with a tool result, the text of that result).
const EchoPrefix = "echo: "

// Tokens returns the token count the fake reports for text in usage: one
// token per run of letters and digits and one per other non-space
// character. "How do I reset my password?" counts 7, as with OpenAI.
func Tokens(text string) int {
	n := 0
	inWord := false
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord {
				n++
				inWord = true
			}
		case unicode.IsSpace(r):
			inWord = false
		default:
			n++
			inWord = false
		}
	}
	return n
}

// part is one element of an array content, for both providers: OpenAI
// content parts ({"type":"text","text"}) and Anthropic blocks, including
// tool_result blocks whose content is nested.
type part struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// contentText returns the text of a message content (a string, an array of
// parts, or null) and whether it holds an Anthropic tool_result block, in
// which case text is the text of the tool results.
func contentText(raw json.RawMessage) (text string, toolResult bool) {
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, false
	case '[':
		var parts []part
		if json.Unmarshal(raw, &parts) != nil {
			return "", false
		}
		var texts, results []string
		for _, p := range parts {
			switch p.Type {
			case "tool_result":
				t, _ := contentText(p.Content)
				results = append(results, t)
			default:
				if p.Text != "" {
					texts = append(texts, p.Text)
				}
			}
		}
		if len(results) > 0 {
			return strings.Join(results, " "), true
		}
		return strings.Join(texts, " "), false
	}
	return "", false
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// toolDef is a tool offered by the request.
type toolDef struct {
	name   string
	schema json.RawMessage // JSON schema of the arguments
}

// toolCall is a tool call of the answer.
type toolCall struct {
	id   string
	name string
	args string // JSON object
}

// toolArguments builds deterministic arguments for a tool from its JSON
// schema: every required property gets its first enum value if any, else
// text for strings, 1 for numbers, true for booleans, [] for arrays, {} for
// objects and null otherwise. Properties come in the order of "required".
func toolArguments(schema json.RawMessage, text string) string {
	var sc struct {
		Properties map[string]struct {
			Type json.RawMessage   `json:"type"`
			Enum []json.RawMessage `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &sc)
	b := []byte{'{'}
	for i, name := range sc.Required {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, name)
		b = append(b, ':')
		p := sc.Properties[name]
		if len(p.Enum) > 0 {
			b = append(b, p.Enum[0]...)
			continue
		}
		switch schemaType(p.Type) {
		case "string":
			b = appendString(b, text)
		case "number", "integer":
			b = append(b, '1')
		case "boolean":
			b = append(b, "true"...)
		case "array":
			b = append(b, "[]"...)
		case "object":
			b = append(b, "{}"...)
		default:
			b = append(b, "null"...)
		}
	}
	return string(append(b, '}'))
}

// schemaType returns the JSON schema type, the first non-null one when it
// is a list.
func schemaType(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	_ = json.Unmarshal(raw, &list)
	for _, t := range list {
		if t != "null" {
			return t
		}
	}
	return ""
}

// splitWords splits s into stream deltas the way tokens arrive: a new piece
// starts at every space ("echo: Hi there" gives "echo:", " Hi", " there").
// The pieces concatenate to s.
func splitWords(s string) []string {
	if s == "" {
		return nil
	}
	pieces := make([]string, 0, 1+strings.Count(s, " "))
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' && s[i-1] != ' ' {
			pieces = append(pieces, s[start:i])
			start = i
		}
	}
	return append(pieces, s[start:])
}

// splitFragments splits s into pieces of at most n bytes, on rune
// boundaries, like the argument fragments of streamed tool calls.
func splitFragments(s string, n int) []string {
	pieces := make([]string, 0, len(s)/n+1)
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			_, i = utf8.DecodeRuneInString(s)
		}
		pieces = append(pieces, s[:i])
		s = s[i:]
	}
	if s != "" {
		pieces = append(pieces, s)
	}
	return pieces
}
