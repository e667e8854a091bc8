package translate

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"time"
)

// AnthropicToOpenAIResponse translates a /v1/messages response into a
// chat.completion whose model field is model. Text blocks are joined into
// message.content, tool_use blocks become message.tool_calls, thinking
// blocks become message.reasoning_content, a blank line apart. An error body (type "error") returns
// an *AnthropicError; anything that is not a message returns an error
// matching ErrMalformedUpstream.
func AnthropicToOpenAIResponse(body []byte, model string) ([]byte, Usage, error) {
	var in msgResponse
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Usage{}, malformed("message is not valid JSON")
	}
	switch {
	case in.Type == "error":
		return nil, Usage{}, parseAnthropicError(body)
	case in.Type != "" && in.Type != "message":
		return nil, Usage{}, malformed("unexpected type " + strconv.Quote(in.Type))
	case in.Role != "" && in.Role != "assistant":
		return nil, Usage{}, malformed("unexpected role " + strconv.Quote(in.Role))
	case in.Content == nil:
		return nil, Usage{}, malformed("message has no content")
	}

	var text, reasoning []byte
	hasText, calls := false, 0
	for i := range in.Content {
		switch b := &in.Content[i]; b.Type {
		case "text":
			text = append(text, b.Text...)
			hasText = true
		case "thinking":
			if b.Thinking != "" && len(reasoning) > 0 {
				reasoning = append(reasoning, reasoningBreak...)
			}
			reasoning = append(reasoning, b.Thinking...)
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, Usage{}, malformed("tool_use block without id or name")
			}
			if !isNull(b.Input) && !isJSONObject(b.Input) {
				return nil, Usage{}, malformed("tool_use input is not an object")
			}
			calls++
		}
		// redacted_thinking, server tools and their results have no
		// Chat Completions counterpart.
	}

	usage := in.Usage.usage()
	out := make([]byte, 0, 256+len(text)+len(reasoning))
	out = append(out, `{"id":`...)
	out = appendString(out, completionID(in.ID))
	out = append(out, `,"object":"chat.completion","created":`...)
	out = appendInt(out, time.Now().Unix())
	out = append(out, `,"model":`...)
	out = appendString(out, model)
	out = append(out, `,"system_fingerprint":null,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	switch {
	case hasText:
		out = appendString(out, string(text))
	case calls > 0:
		out = append(out, "null"...)
	default:
		out = append(out, `""`...)
	}
	if len(reasoning) > 0 {
		out = append(out, `,"reasoning_content":`...)
		out = appendString(out, string(reasoning))
	}
	if calls > 0 {
		out = append(out, `,"tool_calls":[`...)
		var args bytes.Buffer
		n := 0
		for i := range in.Content {
			b := &in.Content[i]
			if b.Type != "tool_use" {
				continue
			}
			if n > 0 {
				out = append(out, ',')
			}
			n++
			args.Reset()
			if isNull(b.Input) || json.Compact(&args, b.Input) != nil {
				args.Reset()
				args.WriteString("{}")
			}
			out = append(out, `{"id":`...)
			out = appendString(out, b.ID)
			out = append(out, `,"type":"function","function":{"name":`...)
			out = appendString(out, b.Name)
			out = append(out, `,"arguments":`...)
			out = appendString(out, args.String())
			out = append(out, "}}"...)
		}
		out = append(out, ']')
	}
	out = append(out, `,"refusal":null,"annotations":[]},"finish_reason":`...)
	out = appendString(out, finishReason(in.StopReason))
	out = append(out, `}],"usage":`...)
	out = appendUsage(out, usage)
	out = append(out, '}')
	return out, usage, nil
}

// AnthropicErrorToOpenAI translates an upstream error body into OpenAI's
// {"error":{"message","type","param","code"}}; the caller keeps the HTTP
// status. Bodies already in OpenAI's shape keep their fields; plain text
// becomes the (shortened) message. A body that says no message (empty, an
// HTML page such as a proxy's 502, JSON of another shape) is returned as it
// is, which the client is given no message of, as of an OpenAI-shaped
// upstream's: the gateway's own names the status.
func AnthropicErrorToOpenAI(body []byte) []byte {
	e := errorOf(body)
	if e == nil {
		return body
	}
	return e.OpenAIBody()
}

// finishReason maps Anthropic's stop_reason to OpenAI's finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn, and anything new
}

// completionID is the chat completion id for an Anthropic message id; an
// upstream that sends none gets a random one.
func completionID(messageID string) string {
	if messageID == "" {
		return "chatcmpl-" + rand.Text()
	}
	return "chatcmpl-" + messageID
}
