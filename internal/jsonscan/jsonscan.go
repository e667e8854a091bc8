// Package jsonscan finds where things are in JSON the caller already knows
// to be valid (checked with encoding/json.Valid or an equivalent walk): the
// end of a value, of a string, of a run of whitespace; an object's members
// and an array's elements in place. Nothing is checked here, and only keys
// with escapes are decoded; on bytes that are not valid JSON the answers
// are only bounded (never past the end of the input), not meaningful.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

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

// Unquote is the JSON string s (its quotes included) as encoding/json
// decodes it, escapes resolved and bad UTF-8 replaced: the bytes between
// its quotes, not copied, when they hold no escape and are valid UTF-8.
// ok is false, and the bytes nil, when s is no JSON string.
func Unquote(s []byte) (b []byte, ok bool) {
	if len(s) < 2 || s[0] != '"' {
		return nil, false
	}
	if inner := s[1 : len(s)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true
	}
	var d string
	if json.Unmarshal(s, &d) != nil {
		return nil, false
	}
	return []byte(d), true
}

// Members calls fn with each member of the JSON object obj (its key as
// encoding/json reads it: escapes resolved, bad UTF-8 replaced; its value's
// raw bytes) until fn returns false. It reports whether obj is an object.
func Members(obj []byte, fn func(key, value []byte) bool) bool {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = SkipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		end := StringEnd(obj, i)
		key, _ := Unquote(obj[i:end])
		i = SkipSpace(obj, end)
		i = SkipSpace(obj, i+1) // the colon
		vend := ValueEnd(obj, i)
		if !fn(key, obj[i:vend]) {
			return true
		}
		i = SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = SkipSpace(obj, i+1)
		}
	}
	return true
}

// Elements calls fn with each element of the JSON array arr until fn
// returns false. It reports whether arr is an array.
func Elements(arr []byte, fn func(value []byte) bool) bool {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = SkipSpace(arr, i+1)
	for i < len(arr) && arr[i] != ']' {
		end := ValueEnd(arr, i)
		if end == i {
			return true // no value here: not valid JSON
		}
		if !fn(arr[i:end]) {
			return true
		}
		i = SkipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = SkipSpace(arr, i+1)
		}
	}
	return true
}

// FoldsTo reports whether key matches one of names only without regard to
// case, as encoding/json matches a struct's fields ("ſ" to "s", "K" to "k"
// too): a reader that matches names exactly leaves such a key to
// encoding/json.
func FoldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if string(key) != n && strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}

// Member answers the raw value of the JSON object obj's first member name
// (obj's own bytes), or nil when it has none.
func Member(obj []byte, name string) []byte {
	var value []byte
	Members(obj, func(k, v []byte) bool {
		if string(k) != name {
			return true
		}
		value = v
		return false
	})
	return value
}

// SetMember answers the JSON object obj with its member name's value
// replaced by value (raw JSON), or, when it has none, with the member added
// first; obj itself is left as it is. Only the value's bytes are written
// anew: the rest of obj is copied as it came.
func SetMember(obj []byte, name string, value []byte) []byte {
	old := Member(obj, name)
	if old == nil {
		i := SkipSpace(obj, 0)
		if i >= len(obj) || obj[i] != '{' {
			return obj
		}
		key, _ := json.Marshal(name)
		out := make([]byte, 0, len(obj)+len(key)+len(value)+2)
		out = append(append(append(append(out, obj[:i+1]...), key...), ':'), value...)
		if j := SkipSpace(obj, i+1); j < len(obj) && obj[j] != '}' {
			out = append(out, ',')
		}
		return append(out, obj[i+1:]...)
	}
	// old is obj's own bytes: where it starts is told by their capacity.
	start := cap(obj) - cap(old)
	end := start + len(old)
	out := make([]byte, 0, len(obj)-len(old)+len(value))
	return append(append(append(out, obj[:start]...), value...), obj[end:]...)
}
