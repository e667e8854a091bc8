package openai

import (
	"strings"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// eachMember calls fn with each top-level member of body, a JSON object
// CheckJSON accepted, in order: its key as written between the quotes and
// its raw value, both in place. It returns false, perhaps after calling fn
// for some members, when a key holds an escape (encoding/json unescapes
// keys: the caller decodes the body with it instead) or body is not an
// object.
func eachMember(body []byte, fn func(key, value []byte)) bool {
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = jsonscan.SkipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return jsonscan.SkipSpace(body, i+1) == len(body)
	}
	for i < len(body) {
		if body[i] != '"' {
			return false
		}
		end := i + 1
		for end < len(body) && body[end] != '"' && body[end] != '\\' {
			end++
		}
		if end >= len(body) || body[end] != '"' {
			return false // an escape in the key
		}
		key := body[i+1 : end]
		i = jsonscan.SkipSpace(body, end+1)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(body, i+1)
		end = jsonscan.ValueEnd(body, i)
		if end <= i {
			return false
		}
		fn(key, body[i:end:end])
		i = jsonscan.SkipSpace(body, end)
		if i >= len(body) {
			return false
		}
		switch body[i] {
		case ',':
			i = jsonscan.SkipSpace(body, i+1)
		case '}':
			return jsonscan.SkipSpace(body, i+1) == len(body)
		default:
			return false
		}
	}
	return false
}

// foldsTo reports whether key matches one of names only without regard to
// case, as encoding/json matches a struct's fields: such a body is left to
// encoding/json, so that it reads the same either way.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}
