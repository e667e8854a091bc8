package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Chat Completions requests to Responses requests, and Responses answers
// back to Chat Completions, for upstreams that speak only the Responses API
// (the ChatGPT backend of codex connections).

// OpenAIToResponsesRequest translates a chat.completions request body into
// a /responses request for upstreamModel: system and developer messages
// become instructions, the rest input items; the upstream stores nothing.
// Stop sequences, which the Responses API does not have, are refused.
func OpenAIToResponsesRequest(body []byte, upstreamModel string) ([]byte, error) {
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, decodeError(err)
	}
	if err := responsesStop(in.Stop); err != nil {
		return nil, err
	}
	out := map[string]any{"model": upstreamModel, "store": false}
	if in.Stream {
		out["stream"] = true
	}
	var instructions []string
	input := []any{}
	for i, m := range in.Messages {
		param := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case "system", "developer":
			parts, err := contentParts(m.Content, param+".content")
			if err != nil {
				return nil, err
			}
			var text []string
			for _, p := range parts {
				text = append(text, p.Text)
			}
			instructions = append(instructions, strings.Join(text, ""))
		case "user":
			parts, err := contentParts(m.Content, param+".content")
			if err != nil {
				return nil, err
			}
			content := []any{}
			for j, p := range parts {
				switch p.Type {
				case "text":
					content = append(content, map[string]string{"type": "input_text", "text": p.Text})
				case "image_url":
					var u struct {
						URL string `json:"url"`
					}
					if json.Unmarshal(p.ImageURL, &u) != nil {
						_ = json.Unmarshal(p.ImageURL, &u.URL)
					}
					if u.URL == "" {
						return nil, invalid(param+".content["+strconv.Itoa(j)+"].image_url", "an image needs a url")
					}
					content = append(content, map[string]string{"type": "input_image", "image_url": u.URL})
				case "file":
					// A PDF Claude Code attached (a Messages document
					// block), or a chat client's file: both dialects
					// take the file's data (a data URL) or an uploaded
					// file's id.
					if p.File == nil || p.File.FileData == "" && p.File.FileID == "" {
						return nil, invalid(param+".content["+strconv.Itoa(j)+"].file", "a file needs file_data or file_id")
					}
					file := map[string]string{"type": "input_file"}
					for k, v := range map[string]string{"file_data": p.File.FileData, "file_id": p.File.FileID, "filename": p.File.Filename} {
						if v != "" {
							file[k] = v
						}
					}
					content = append(content, file)
				default:
					return nil, invalid(param+".content["+strconv.Itoa(j)+"].type", "unsupported content part "+strconv.Quote(p.Type))
				}
			}
			input = append(input, map[string]any{"type": "message", "role": "user", "content": content})
		case "assistant":
			parts, err := contentParts(m.Content, param+".content")
			if err != nil {
				return nil, err
			}
			var text strings.Builder
			for _, p := range parts {
				text.WriteString(p.Text)
				text.WriteString(p.Refusal)
			}
			if text.Len() > 0 {
				input = append(input, map[string]any{"type": "message", "role": "assistant",
					"content": []any{map[string]any{"type": "output_text", "text": text.String(), "annotations": []any{}}}})
			}
			for _, tc := range m.ToolCalls {
				args := string(tc.Function.Arguments)
				var s string
				if json.Unmarshal(tc.Function.Arguments, &s) == nil {
					args = s
				}
				input = append(input, map[string]any{"type": "function_call", "call_id": tc.ID, "name": tc.Function.Name, "arguments": args})
			}
		case "tool":
			parts, err := contentParts(m.Content, param+".content")
			if err != nil {
				return nil, err
			}
			var text strings.Builder
			for _, p := range parts {
				text.WriteString(p.Text)
			}
			input = append(input, map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": text.String()})
		default:
			return nil, invalid(param+".role", "unsupported role "+strconv.Quote(m.Role))
		}
	}
	out["input"] = input
	out["instructions"] = strings.Join(instructions, "\n\n")
	var tools []any
	for _, t := range in.Tools {
		if t.Type != "function" || t.Function == nil {
			continue
		}
		// Strict only when the request asks: the Responses API would hold
		// every schema to strict mode, and refuse those it cannot take.
		tool := map[string]any{"type": "function", "name": t.Function.Name, "strict": t.Function.Strict}
		if t.Function.Description != "" {
			tool["description"] = t.Function.Description
		}
		if len(t.Function.Parameters) > 0 {
			tool["parameters"] = t.Function.Parameters
		}
		tools = append(tools, tool)
	}
	if len(tools) > 0 {
		out["tools"] = tools
		if len(in.ToolChoice) > 0 && !isNull(in.ToolChoice) {
			var s string
			var obj struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			switch {
			case json.Unmarshal(in.ToolChoice, &s) == nil:
				out["tool_choice"] = s
			case json.Unmarshal(in.ToolChoice, &obj) == nil && obj.Function.Name != "":
				out["tool_choice"] = map[string]string{"type": "function", "name": obj.Function.Name}
			default:
				return nil, invalid("tool_choice", "tool_choice must be none, auto, required or a function")
			}
		}
		if in.ParallelToolCalls != nil {
			out["parallel_tool_calls"] = *in.ParallelToolCalls
		}
	}
	if in.MaxCompletionTokens != nil {
		out["max_output_tokens"] = *in.MaxCompletionTokens
	} else if in.MaxTokens != nil {
		out["max_output_tokens"] = *in.MaxTokens
	}
	if in.Temperature != nil {
		out["temperature"] = *in.Temperature
	}
	if in.TopP != nil {
		out["top_p"] = *in.TopP
	}
	if in.ReasoningEffort != "" {
		out["reasoning"] = map[string]string{"effort": in.ReasoningEffort}
	}
	format, err := responsesTextFormat(in.ResponseFormat)
	if err != nil {
		return nil, err
	}
	if format != nil {
		out["text"] = map[string]any{"format": format}
	}
	return marshal(out)
}

// responsesStop checks the shape of a chat request's stop (a string or an
// array of strings), which is not sent: the Responses API has no stop
// sequences, and the caller stops the answer at them itself.
func responsesStop(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var list []string
	var one string
	if json.Unmarshal(raw, &one) != nil && json.Unmarshal(raw, &list) != nil {
		return invalid("stop", "must be a string or an array of strings")
	}
	return nil
}

// responsesTextFormat is a chat request's response_format as the Responses
// API's text.format, whose json_schema carries the schema's name,
// description, schema and strict beside its type; nil when there is none.
func responsesTextFormat(raw json.RawMessage) (map[string]any, error) {
	if isNull(raw) {
		return nil, nil
	}
	var v struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil, invalid("response_format", "must be an object with a type")
	}
	switch v.Type {
	case "text", "json_object":
		return map[string]any{"type": v.Type}, nil
	case "json_schema":
		s := v.JSONSchema
		if s == nil || s.Name == "" {
			return nil, invalid("response_format.json_schema.name", "a json_schema response_format needs a name")
		}
		format := map[string]any{"type": "json_schema", "name": s.Name}
		if s.Description != "" {
			format["description"] = s.Description
		}
		if !isNull(s.Schema) {
			format["schema"] = s.Schema
		}
		if s.Strict != nil {
			format["strict"] = *s.Strict
		}
		return format, nil
	}
	return nil, invalid("response_format.type", "unsupported response_format type "+strconv.Quote(v.Type))
}

// respOutput is the part of a Responses response the translators read.
type respOutput struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output []struct {
		Type    string     `json:"type"`
		ID      string     `json:"id"`
		CallID  string     `json:"call_id"`
		Name    string     `json:"name"`
		Args    string     `json:"arguments"`
		Content []respPart `json:"content"`
		Summary []respPart `json:"summary"`
	} `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *ResponsesUsage `json:"usage"`
}

// incompleteFinish is the chat finish_reason of an incomplete response: its
// content filter's, or the output cap's.
func (r *respOutput) incompleteFinish() string {
	if r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "content_filter" {
		return "content_filter"
	}
	return "length"
}

// ResponsesUsage is the Responses API's usage object.
type ResponsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (r *respOutput) usage() Usage {
	if r.Usage == nil {
		return Usage{}
	}
	u := r.Usage
	in, out := nonNegative(u.InputTokens), nonNegative(u.OutputTokens)
	return Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: addSat(in, out),
		CachedTokens: min(nonNegative(u.InputTokensDetails.CachedTokens), in), ReasoningTokens: nonNegative(u.OutputTokensDetails.ReasoningTokens)}
}

func chatID(respID string) string {
	id := strings.TrimPrefix(respID, "resp_")
	if id == "" {
		return completionID("")
	}
	return "chatcmpl-" + id
}

// reasoningBreak separates the parts of a Responses answer's reasoning
// summary, and its reasoning items, in a chat answer's reasoning_content:
// the Responses API sends each part without one. An Anthropic answer's
// thinking blocks are kept apart by it too.
const reasoningBreak = "\n\n"

// addReasoning adds a part of a Responses answer's reasoning to a chat
// answer's, a paragraph after those before it.
func addReasoning(b *strings.Builder, part string) {
	if part == "" {
		return
	}
	if b.Len() > 0 {
		b.WriteString(reasoningBreak)
	}
	b.WriteString(part)
}

// addReasoningItem adds a Responses reasoning item's text to b: its
// summary's parts, then its raw reasoning's (reasoning_text, as gpt-oss
// models send it), each a paragraph, as streamed.
func addReasoningItem(b *strings.Builder, summary, content []respPart) {
	for _, s := range summary {
		addReasoning(b, s.Text)
	}
	for _, c := range content {
		if c.Type == "reasoning_text" {
			addReasoning(b, c.Text)
		}
	}
}

// ResponsesToOpenAIResponse translates a Responses response into a
// chat.completion for model.
func ResponsesToOpenAIResponse(body []byte, model string) ([]byte, Usage, error) {
	var r respOutput
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, Usage{}, malformed("response is not valid JSON")
	}
	var text, refusal, reasoning strings.Builder
	calls := []any{}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				text.WriteString(c.Text)
				refusal.WriteString(c.Refusal)
			}
		case "reasoning":
			addReasoningItem(&reasoning, it.Summary, it.Content)
		case "function_call":
			calls = append(calls, map[string]any{"id": it.CallID, "type": "function",
				"function": map[string]string{"name": it.Name, "arguments": it.Args}})
		}
	}
	msg := map[string]any{"role": "assistant", "content": text.String(), "refusal": nil}
	if refusal.Len() > 0 {
		// As OpenAI's chat answers carry a refusal: content null.
		msg["refusal"] = refusal.String()
		if text.Len() == 0 {
			msg["content"] = nil
		}
	}
	finish := "stop"
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	if r.Status == "incomplete" {
		finish = r.incompleteFinish()
	}
	if reasoning.Len() > 0 {
		msg["reasoning_content"] = reasoning.String()
	}
	u := r.usage()
	out, err := marshal(map[string]any{
		"id": chatID(r.ID), "object": "chat.completion", "created": nowUnix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   json.RawMessage(appendUsage(nil, u)),
	})
	return out, u, err
}
