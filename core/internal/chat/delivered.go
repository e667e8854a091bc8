package chat

import (
	"bytes"
	"strings"
)

// delivered counts what a stream relayed to the client, so that a stream
// that fails or is abandoned after content reached the client is billed for
// it: the usage the upstream reported if it did, else an estimate of about
// four characters per token of the delivered content, reasoning, refusals
// and tool-call arguments.
type delivered struct {
	chars int64
}

// charsPerToken is the estimate's ratio.
const charsPerToken = 4

// The members whose string values a client was sent as text, per event
// shape. In an OpenAI chat chunk "content" also matches
// "reasoning_content"; Anthropic's deltas carry "text", "thinking" and a
// tool call's "partial_json"; a Responses stream's text and argument deltas
// carry "delta" (its ".done" events repeat what the deltas sent, so only
// deltas are counted).
var (
	chatMembers      = [][]byte{[]byte(`content"`), []byte(`arguments"`), []byte(`refusal"`)}
	messagesMembers  = [][]byte{[]byte(`"text"`), []byte(`"thinking"`), []byte(`"partial_json"`)}
	responsesMembers = [][]byte{[]byte(`"delta"`)}
)

// deliveredChars counts the text of one event that reached the client: an
// OpenAI chat chunk (no event name), an Anthropic Messages event or an
// OpenAI Responses event (named). It scans the bytes
// for the members above instead of decoding the event.
func deliveredChars(event string, data []byte) int64 {
	members := deliveredMembers(event)
	var chars int64
	for _, f := range members {
		rest := data
		for {
			i := bytes.Index(rest, f)
			if i < 0 {
				break
			}
			rest = rest[i+len(f):]
			j := 0
			for j < len(rest) && (rest[j] == ' ' || rest[j] == ':' || rest[j] == '\t') {
				j++
			}
			if j == 0 || j >= len(rest) || rest[j] != '"' {
				continue
			}
			n, end := countString(rest[j+1:])
			chars += n
			rest = rest[j+1+end:]
		}
	}
	return chars
}

// deliveredMembers are the members whose text an event of this name
// carries, or nil.
func deliveredMembers(event string) [][]byte {
	switch {
	case event == "":
		return chatMembers
	case strings.HasPrefix(event, "response."):
		if !strings.HasSuffix(event, ".delta") {
			return nil
		}
		return responsesMembers
	case event == "content_block_delta":
		return messagesMembers
	}
	return nil // message_start, content_block_start (empty text), ping, ...
}

// counter is an eventTranslator that counted the text of the events it
// relays as they are, on the walk that read them (walk.chars, equal to
// deliveredChars for valid JSON): ok when data is the event it relayed
// last.
type counter interface {
	counted(event string, data []byte) (chars int64, ok bool)
}

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// countString counts the characters of a JSON string body up to its closing
// quote (an escape counts as one), and returns where it ended.
func countString(b []byte) (chars int64, end int) {
	i := 0
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return chars, i + 1
		case c == '\\':
			i += 2
			if i-1 < len(b) && b[i-1] == 'u' {
				i += 4
			}
		case c < 0x80 || c >= 0xc0:
			i++ // ASCII or the first byte of a multi-byte character
		default:
			i++
			continue // continuation byte: not a new character
		}
		chars++
	}
	return chars, len(b)
}

// bill is the usage of a stream that ended early: what the upstream
// reported, else the estimate of the completion (the prompt's, when the
// upstream told none, is added for the record by withPrompt).
func (d *delivered) bill(reported Usage) Usage {
	reported.Partial = true
	if reported.TotalTokens > 0 || reported.CompletionTokens > 0 {
		return reported
	}
	est := (d.chars + charsPerToken - 1) / charsPerToken
	reported.CompletionTokens = est
	reported.TotalTokens = reported.PromptTokens + est
	reported.Estimated = est > 0
	return reported
}

// stopped is the usage of an answer the gateway ended at a stop sequence
// (stop.go): what the upstream reported, else the estimate, as bill's; the
// answer is whole, not partial.
func (d *delivered) stopped(reported Usage) Usage {
	u := d.bill(reported)
	u.Partial = false
	return u
}
