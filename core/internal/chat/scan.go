package chat

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// A few readers of raw JSON the gateway already checked with json.Valid:
// they find a member's bytes without decoding the rest (an answer's
// content, a chunk's delta), so only the small values it needs (usage, a
// finish reason) go through encoding/json.

// members calls fn with each member of the JSON object obj (its key
// unquoted, its value's raw bytes) until fn returns false. It reports
// whether obj is an object.
func members(obj []byte, fn func(key, value []byte) bool) bool {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = jsonscan.SkipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		end := jsonscan.StringEnd(obj, i)
		key := obj[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			// encoding/json's reading: escapes resolved, bad UTF-8 replaced.
			var s string
			_ = json.Unmarshal(obj[i:end], &s)
			key = []byte(s)
		}
		i = jsonscan.SkipSpace(obj, end)
		i = jsonscan.SkipSpace(obj, i+1) // the colon
		vend := jsonscan.ValueEnd(obj, i)
		if !fn(key, obj[i:vend]) {
			return true
		}
		i = jsonscan.SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = jsonscan.SkipSpace(obj, i+1)
		}
	}
	return true
}

// elements calls fn with each element of the JSON array arr until fn
// returns false. It reports whether arr is an array.
func elements(arr []byte, fn func(value []byte) bool) bool {
	i := jsonscan.SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = jsonscan.SkipSpace(arr, i+1)
	for i < len(arr) && arr[i] != ']' {
		end := jsonscan.ValueEnd(arr, i)
		if !fn(arr[i:end]) {
			return true
		}
		i = jsonscan.SkipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = jsonscan.SkipSpace(arr, i+1)
		}
	}
	return true
}

// member returns the raw value of the object's last member named name (as
// encoding/json matches names, case-insensitively), or nil.
func member(obj []byte, name string) []byte {
	var found []byte
	members(obj, func(k, v []byte) bool {
		if len(k) == len(name) && (string(k) == name || bytes.EqualFold(k, []byte(name))) {
			found = v
		}
		return true
	})
	return found
}

// isNull reports whether a raw value is JSON null.
func isNull(v []byte) bool { return string(v) == "null" }

// decode reads OpenAI's usage object from raw as encoding/json would into
// u (names matched case-insensitively, a null leaving a field as it is,
// the well-typed members set even when another is not); ok is false when
// a member has the wrong type.
func (u *usageJSON) decode(raw []byte) (ok bool) {
	if isNull(raw) {
		return true
	}
	ok = true
	num := func(dst *int64, v []byte) {
		if isNull(v) {
			return
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			ok = false
			return
		}
		*dst = n
	}
	nested := func(v []byte, name string, dst *int64) {
		if isNull(v) {
			return
		}
		if !members(v, func(k, v []byte) bool {
			if bytes.EqualFold(k, []byte(name)) {
				num(dst, v)
			}
			return true
		}) {
			ok = false
		}
	}
	if !members(raw, func(k, v []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("prompt_tokens")):
			num(&u.PromptTokens, v)
		case bytes.EqualFold(k, []byte("completion_tokens")):
			num(&u.CompletionTokens, v)
		case bytes.EqualFold(k, []byte("total_tokens")):
			num(&u.TotalTokens, v)
		case bytes.EqualFold(k, []byte("prompt_tokens_details")):
			nested(v, "cached_tokens", &u.PromptTokensDetails.CachedTokens)
		case bytes.EqualFold(k, []byte("completion_tokens_details")):
			nested(v, "reasoning_tokens", &u.CompletionTokensDetails.ReasoningTokens)
		}
		return true
	}) {
		return false
	}
	return ok
}
