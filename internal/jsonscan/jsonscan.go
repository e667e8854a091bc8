// Package jsonscan finds where things are in JSON the caller already knows
// to be valid (checked with encoding/json.Valid or an equivalent walk): the
// end of a value, of a string, of a run of whitespace. Nothing is decoded
// or checked here; on bytes that are not valid JSON the answers are only
// bounded (never past the end of the input), not meaningful.
package jsonscan

import "bytes"

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (len(b) when there is none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// ValueEnd returns the end of the JSON value that starts at b[i]: after
// its closing quote or bracket, or at the delimiter (a comma, a closing
// bracket, whitespace) that follows a number or a literal.
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = StringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// StringEnd returns the end of the JSON string that starts at b[i] (a
// quote): just after its closing quote.
func StringEnd(b []byte, i int) int {
	i++
	for i < len(b) {
		j := bytes.IndexAny(b[i:], `"\`)
		if j < 0 {
			return len(b)
		}
		i += j
		if b[i] == '\\' {
			i += 2
			continue
		}
		return i + 1
	}
	return min(i, len(b))
}

// Members calls fn with each member of the JSON object b, in order: its key
// as written between the quotes and its raw value, both in place. It
// returns false, perhaps after calling fn for some members, when a key
// holds an escape (encoding/json unescapes keys: the caller decodes b with
// it instead) or b is not one object.
func Members(b []byte, fn func(key, value []byte)) bool {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return SkipSpace(b, i+1) == len(b)
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		end := i + 1
		for end < len(b) && b[end] != '"' && b[end] != '\\' {
			end++
		}
		if end >= len(b) || b[end] != '"' {
			return false // an escape in the key
		}
		key := b[i+1 : end]
		i = SkipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = SkipSpace(b, i+1)
		end = ValueEnd(b, i)
		if end <= i {
			return false
		}
		fn(key, b[i:end:end])
		i = SkipSpace(b, end)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
	return false
}
