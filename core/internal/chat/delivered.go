package chat

import "bytes"

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

// textMembers are the chunk members whose string values the client was sent as
// text. "content" also matches "reasoning_content".
var textMembers = [][]byte{[]byte(`content"`), []byte(`arguments"`), []byte(`refusal"`)}

// add counts the text of one OpenAI chat chunk that reached the client. It
// scans the bytes for the members above instead of decoding the chunk.
func (d *delivered) add(chunk []byte) {
	for _, f := range textMembers {
		rest := chunk
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
			d.chars += n
			rest = rest[j+1+end:]
		}
	}
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
// reported, else the estimate (completion tokens only; the prompt's count
// is the upstream's to tell).
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
