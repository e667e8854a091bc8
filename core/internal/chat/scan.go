package chat

import (
	"bytes"

	"github.com/switchboardhq/switchboard/core/internal/translate"
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

// decode reads OpenAI's usage object from raw as the translated routes
// read it (translate.ChatUsage): names matched case-insensitively, a null
// leaving a field as it is, a count written as a whole-valued number (3.0,
// 3e1, as some compatible servers send) read as that count and any other
// count as 0. A usage that is not an object counts nothing, details that
// are not one count nothing of their own; the answer is read all the same.
func (u *usageJSON) decode(raw []byte) {
	if isNull(raw) {
		return
	}
	nested := func(v []byte, name string, dst *int64) {
		jsonscan.Members(v, func(k, v []byte) bool {
			if bytes.EqualFold(k, []byte(name)) {
				count(dst, v)
			}
			return true
		})
	}
	if !jsonscan.Members(raw, func(k, v []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("prompt_tokens")):
			count(&u.PromptTokens, v)
		case bytes.EqualFold(k, []byte("completion_tokens")):
			count(&u.CompletionTokens, v)
		case bytes.EqualFold(k, []byte("total_tokens")):
			count(&u.TotalTokens, v)
		case bytes.EqualFold(k, []byte("prompt_tokens_details")):
			nested(v, "cached_tokens", &u.PromptTokensDetails.CachedTokens)
		case bytes.EqualFold(k, []byte("completion_tokens_details")):
			nested(v, "reasoning_tokens", &u.CompletionTokensDetails.ReasoningTokens)
		}
		return true
	}) {
		*u = usageJSON{}
	}
}

// count reads a token count into dst: an integer, or a whole-valued number
// written otherwise (3.0, 3e1); any other value is 0, and null leaves dst
// as it is.
func count(dst *int64, v []byte) {
	if isNull(v) {
		return
	}
	*dst = translate.TokenCount(v)
}
