package caveman

import (
	"encoding/json"
	"fmt"
	"slices"
)

// InjectOpenAI adds level's prompt to a Chat Completions request body: it is
// appended to the content of the first "system" or "developer" message (a
// string gets "\n\n" and the prompt, an array of content parts gets a text
// part, a null or missing content becomes the prompt), or, when there is no
// such message, a system message holding the prompt is inserted first.
// A body whose system or developer messages already carry a prompt is
// returned unchanged.
func InjectOpenAI(body []byte, level string) ([]byte, error) {
	prompt, err := promptFor(level)
	if err != nil {
		return nil, err
	}
	o, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	raw, _ := o.get("messages")
	if kindOf(raw) != kindArray {
		return nil, fmt.Errorf("%w: messages is not an array", ErrMalformedBody)
	}
	msgs, err := parseArray(raw)
	if err != nil {
		return nil, err
	}

	first := -1
	var firstMsg object
	for i, m := range msgs {
		if kindOf(m) != kindObject {
			continue // not a message; the upstream will say so
		}
		if r := role(m); r != "system" && r != "developer" {
			continue
		}
		mo, err := parseObject(m)
		if err != nil {
			return nil, err
		}
		content, _ := mo.get("content")
		if hasPrompt(content) {
			return body, nil
		}
		if first < 0 {
			first, firstMsg = i, mo
		}
	}

	if first < 0 {
		sys := object{
			{key: "role", value: json.RawMessage(`"system"`)},
			{key: "content", value: encodeString(prompt)},
		}
		msgs = slices.Insert(msgs, 0, json.RawMessage(sys.marshal()))
	} else {
		content, ok := firstMsg.get("content")
		updated, err := appendContent(content, ok, prompt)
		if err != nil {
			return nil, err
		}
		firstMsg.set("content", updated)
		msgs[first] = firstMsg.marshal()
	}
	o.set("messages", marshalArray(msgs))
	return o.marshal(), nil
}

// InjectResponses adds level's prompt to a Responses API request body by
// appending it to "instructions", which is created when absent or null.
// A body whose instructions already carry a prompt is returned unchanged.
func InjectResponses(body []byte, level string) ([]byte, error) {
	prompt, err := promptFor(level)
	if err != nil {
		return nil, err
	}
	o, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	raw, ok := o.get("instructions")
	switch {
	case !ok || kindOf(raw) == kindNull:
		o.set("instructions", encodeString(prompt))
	case kindOf(raw) == kindString:
		s, _ := stringValue(raw)
		if hasPrompt(raw) {
			return body, nil
		}
		o.set("instructions", appendText(s, prompt))
	default:
		return nil, fmt.Errorf("%w: instructions is not a string", ErrMalformedBody)
	}
	return o.marshal(), nil
}

// InjectAnthropic adds level's prompt to a Messages API request body's
// "system": a string gets "\n\n" and the prompt; an array of blocks gets a
// text block inserted just before the last block that carries
// cache_control (so the prompt joins the cached prefix and the breakpoint
// still ends it), or appended when no block does; an absent or null system
// becomes the prompt. A body whose system already carries a prompt is
// returned unchanged.
func InjectAnthropic(body []byte, level string) ([]byte, error) {
	prompt, err := promptFor(level)
	if err != nil {
		return nil, err
	}
	o, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	raw, ok := o.get("system")
	if hasPrompt(raw) {
		return body, nil
	}
	switch {
	case !ok || kindOf(raw) == kindNull:
		o.set("system", encodeString(prompt))
	case kindOf(raw) == kindString:
		s, _ := stringValue(raw)
		o.set("system", appendText(s, prompt))
	case kindOf(raw) == kindArray:
		blocks, err := parseArray(raw)
		if err != nil {
			return nil, err
		}
		at := len(blocks)
		for i := len(blocks) - 1; i >= 0; i-- {
			if hasCacheControl(blocks[i]) {
				at = i
				break
			}
		}
		o.set("system", marshalArray(slices.Insert(blocks, at, textPart(prompt))))
	default:
		return nil, fmt.Errorf("%w: system is neither a string nor an array", ErrMalformedBody)
	}
	return o.marshal(), nil
}

// appendContent appends prompt to a chat message's content: a string gets
// "\n\n" and the prompt, an array of parts a text part; a missing or null
// content becomes the prompt.
func appendContent(content json.RawMessage, present bool, prompt string) (json.RawMessage, error) {
	switch k := kindOf(content); {
	case !present || k == kindNull:
		return encodeString(prompt), nil
	case k == kindString:
		s, _ := stringValue(content)
		return appendText(s, prompt), nil
	case k == kindArray:
		parts, err := parseArray(content)
		if err != nil {
			return nil, err
		}
		return marshalArray(append(parts, textPart(prompt))), nil
	}
	return nil, fmt.Errorf("%w: system message content is neither a string nor an array", ErrMalformedBody)
}

func promptFor(level string) (string, error) {
	p, ok := Prompt(level)
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownLevel, level)
	}
	return p, nil
}

// hasPrompt reports whether a content value (a string, or an array of parts
// or blocks with "text" fields) already carries any level's prompt.
func hasPrompt(content json.RawMessage) bool {
	switch kindOf(content) {
	case kindString:
		s, _ := stringValue(content)
		return containsPrompt(s)
	case kindArray:
		parts, err := parseArray(content)
		if err != nil {
			return false
		}
		for _, p := range parts {
			if kindOf(p) != kindObject {
				continue
			}
			po, err := parseObject(p)
			if err != nil {
				continue
			}
			text, _ := po.get("text")
			if s, ok := stringValue(text); ok && containsPrompt(s) {
				return true
			}
		}
	}
	return false
}

// hasCacheControl reports whether an Anthropic system block carries a
// non-null cache_control.
func hasCacheControl(block json.RawMessage) bool {
	if kindOf(block) != kindObject {
		return false
	}
	bo, err := parseObject(block)
	if err != nil {
		return false
	}
	cc, ok := bo.get("cache_control")
	return ok && kindOf(cc) != kindNull
}
