package chat

import (
	"bytes"
	"strconv"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// A few readers of raw JSON the gateway already checked with json.Valid:
// they find a member's bytes without decoding the rest (an answer's
// content, a chunk's delta), so only the small values it needs (usage, a
// finish reason) go through encoding/json.

// member returns the raw value of the object's last member named name (as
// encoding/json matches names, case-insensitively), or nil.
func member(obj []byte, name string) []byte {
	var found []byte
	jsonscan.Members(obj, func(k, v []byte) bool {
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
		if !jsonscan.Members(v, func(k, v []byte) bool {
			if bytes.EqualFold(k, []byte(name)) {
				num(dst, v)
			}
			return true
		}) {
			ok = false
		}
	}
	if !jsonscan.Members(raw, func(k, v []byte) bool {
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
