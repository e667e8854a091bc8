package translate

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// read fills c from data, valid JSON, as json.Unmarshal would, reading in
// place what a chunk holds most often (an id, choices with a delta and a
// finish reason) and handing the rest (tool calls, usage) to
// json.Unmarshal member by member. It returns false, for json.Unmarshal to
// read the whole chunk instead, on anything it is not sure of: a key that
// matches a field only without regard to case, a repeated field, a value
// of another type than the field's.
func (c *chatChunk) read(data []byte) bool {
	var seen [4]bool
	ok := true
	return jsonscan.Members(data, func(key, v []byte) bool {
		switch field(key, seen[:], "id", "choices", "usage", "error") {
		case 0:
			ok = readString(v, &c.ID)
		case 1:
			ok = c.readChoices(v)
		case 2:
			ok = isNull(v) || json.Unmarshal(v, &c.Usage) == nil
		case 3:
			c.Error = v
		case -2:
			ok = false
		}
		return ok
	}) && ok
}

// field is the index among names of key, -1 for none (a member json.Unmarshal
// ignores), or -2 for one read only with care (matching without regard to
// case, or repeated).
func field(key []byte, seen []bool, names ...string) int {
	for i, n := range names {
		if string(key) == n {
			if seen[i] {
				return -2
			}
			seen[i] = true
			return i
		}
	}
	if jsonscan.FoldsTo(key, names...) {
		return -2
	}
	return -1
}

func (c *chatChunk) readChoices(v []byte) bool {
	if isNull(v) {
		c.Choices = nil
		return true
	}
	c.Choices = make([]chunkChoice, 0, 1)
	ok := true
	return jsonscan.Elements(v, func(e []byte) bool {
		c.Choices = append(c.Choices, chunkChoice{})
		ok = c.Choices[len(c.Choices)-1].read(e)
		return ok
	}) && ok
}

func (ch *chunkChoice) read(v []byte) bool {
	if isNull(v) {
		return true
	}
	var seen [4]bool
	ok := true
	return jsonscan.Members(v, func(key, m []byte) bool {
		switch field(key, seen[:], "delta", "finish_reason", "stop_reason", "matched_stop") {
		case 0:
			ok = ch.Delta.read(m)
		case 1:
			ok = readStringPtr(m, &ch.FinishReason)
		case 2:
			ch.StopReason = m
		case 3:
			ch.MatchedStop = m
		case -2:
			ok = false
		}
		return ok
	}) && ok
}

func (d *chunkDelta) read(v []byte) bool {
	if isNull(v) {
		return true
	}
	var seen [5]bool
	ok := true
	return jsonscan.Members(v, func(key, m []byte) bool {
		switch field(key, seen[:], "content", "reasoning_content", "reasoning", "tool_calls", "refusal") {
		case 0:
			ok = readStringPtr(m, &d.Content)
		case 1:
			ok = readStringPtr(m, &d.ReasoningContent)
		case 2:
			ok = readStringPtr(m, &d.Reasoning)
		case 3:
			ok = json.Unmarshal(m, &d.ToolCalls) == nil
		case 4:
			ok = readStringPtr(m, &d.Refusal)
		case -2:
			ok = false
		}
		return ok
	}) && ok
}

// readString reads a JSON string or null (leaving s) into s.
func readString(v []byte, s *string) bool {
	if isNull(v) {
		return true
	}
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	in := v[1 : len(v)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		*s = string(in)
		return true
	}
	return json.Unmarshal(v, s) == nil
}

// readStringPtr reads a JSON string into a new *s, or null into nil.
func readStringPtr(v []byte, s **string) bool {
	if isNull(v) {
		*s = nil
		return true
	}
	var str string
	if !readString(v, &str) {
		return false
	}
	*s = &str
	return true
}
