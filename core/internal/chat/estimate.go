package chat

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// billedWhole is the usage a whole answer is billed: the upstream's, or,
// when it reported none (no usage, or zeros), the gateway's count, about
// four characters a token of the request's text (the prompt) and of the
// answer's (the completion), estimated then true, as a stream's usage is
// when it ended early (delivered.go). The answer the client gets keeps
// what the upstream sent, but for an answer the gateway stopped at a
// sequence, which carries what it is billed (billedStop).
func billedWhole(in inbound, answer []byte, u Usage) Usage {
	if reported(u) {
		return u // the answer is read only when there is something to count
	}
	return billed(in, answerChars(in.dialect, answer), u)
}

// billedStream is the usage a stream that ended whole is billed, as a
// whole answer is (billedWhole): the upstream's, or the gateway's count of
// the request's text and of the text it delivered (delivered.go).
func billedStream(in inbound, d delivered, u Usage) Usage {
	return billed(in, d.chars, u)
}

// billed is u, or, when it reports nothing, the estimate of the request's
// text and of an answer of answer characters.
func billed(in inbound, answer int64, u Usage) Usage {
	if reported(u) {
		return u
	}
	prompt, completion := tokens(promptChars(in)), tokens(answer)
	return Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion, Estimated: prompt+completion > 0}
}

// withPrompt is u with the gateway's count of the request's text as its
// prompt, marked estimated, when u is an estimate or a stream cut short
// without one: an upstream that had not told its count read the prompt all
// the same, even when no text came back. Only the record changes; what the
// client was sent keeps what the upstream said (an answer stopped at a
// sequence was sent it already: billedStop).
func withPrompt(in inbound, u Usage) Usage {
	if !(u.Estimated || u.Partial) || u.PromptTokens > 0 {
		return u
	}
	p := tokens(promptChars(in))
	u.PromptTokens, u.TotalTokens = p, u.TotalTokens+p
	u.Estimated = u.Estimated || p > 0
	return u
}

// billedStop is the usage of an answer the gateway ended at a stop
// sequence (stop.go) after chars characters of text: the upstream's if it
// reported any, else the gateway's count of what was delivered and of the
// request's text, estimated then true, as the answer is billed (billed,
// withPrompt). The gateway writes it into the answer it ends, whose
// upstream told none: the client is told what it is billed.
func billedStop(in inbound, chars int64, up Usage) Usage {
	d := delivered{chars: chars}
	u := d.stopped(up)
	if !reported(u) {
		return billed(in, 0, u) // nothing delivered: the prompt alone
	}
	return withPrompt(in, u)
}

// reported reports whether u already says something: the upstream's
// counts, or an estimate the gateway made.
func reported(u Usage) bool {
	return u.Estimated || u.PromptTokens > 0 || u.CompletionTokens > 0 || u.TotalTokens > 0
}

// tokens is the estimate of chars characters, rounded up.
func tokens(chars int64) int64 { return (chars + charsPerToken - 1) / charsPerToken }

// promptMembers are the members of a request (of any dialect) a model
// reads: the conversation, its instructions and the tools.
var promptMembers = []string{"system", "instructions", "messages", "input", "tools", "functions"}

// promptChars counts the characters of a request's text (textChars).
func promptChars(in inbound) int64 {
	var n int64
	for _, k := range promptMembers {
		if raw := in.fields[k]; len(raw) > 0 {
			n += textChars(raw)
		}
	}
	return n
}

// answerChars counts the characters of a whole answer's text (textChars)
// in the client's dialect: a completion's messages, a message's content, a
// response's output.
func answerChars(d Dialect, answer []byte) int64 {
	var a struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return 0
	}
	switch d {
	case DialectMessages:
		return textChars(a.Content)
	case DialectResponses:
		return textChars(a.Output)
	}
	var n int64
	for _, c := range a.Choices {
		n += textChars(c.Message)
	}
	return n
}

// notText are the members whose values are no text a model reads or
// writes: names of types and roles, ids, signatures and encrypted
// reasoning, media (their data, or where they are), and log
// probabilities (which repeat the text).
var notText = map[string]bool{
	"type": true, "role": true, "id": true, "call_id": true, "tool_call_id": true, "tool_use_id": true,
	"status": true, "signature": true, "encrypted_content": true, "cache_control": true,
	"image_url": true, "url": true, "file_data": true, "file_id": true, "input_audio": true, "audio": true,
	"media_type": true, "detail": true, "logprobs": true,
}

// textChars counts the characters of the strings in a JSON value, but for
// those of notText's members, data URLs, and the data of a block that is
// not text (an image's base64, redacted thinking).
func textChars(raw json.RawMessage) int64 {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	return countText(v)
}

func countText(v any) int64 {
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "data:") {
			return 0
		}
		return int64(utf8.RuneCountInString(v))
	case []any:
		var n int64
		for _, e := range v {
			n += countText(e)
		}
		return n
	case map[string]any:
		typ, _ := v["type"].(string)
		var n int64
		for k, e := range v {
			if notText[k] || (k == "data" && typ != "text") {
				continue
			}
			n += countText(e)
		}
		return n
	}
	return 0
}
