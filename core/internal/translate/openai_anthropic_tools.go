package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// assistantBlocks converts an assistant message: its text, then its tool
// calls as tool_use blocks.
func assistantBlocks(m *chatMessage, param string) ([]msgBlock, error) {
	parts, err := contentParts(m.Content, param+".content")
	if err != nil {
		return nil, err
	}
	blocks := make([]msgBlock, 0, len(parts)+len(m.ToolCalls))
	for j := range parts {
		p := &parts[j]
		pp := param + ".content[" + strconv.Itoa(j) + "]"
		if p.Type != "text" && p.Type != "refusal" {
			return nil, invalid(pp+".type", "assistant content part type "+strconv.Quote(p.Type)+" is not supported")
		}
		if b, ok, err := textBlock(p, pp); err != nil {
			return nil, err
		} else if ok {
			blocks = append(blocks, b)
		}
	}
	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		pp := param + ".tool_calls[" + strconv.Itoa(j) + "]"
		if tc.Type != "" && tc.Type != "function" {
			return nil, invalid(pp+".type", "tool call type "+strconv.Quote(tc.Type)+" is not supported")
		}
		id := ToolID(tc.ID)
		if id == "" {
			return nil, invalid(pp+".id", "id is required")
		}
		if tc.Function.Name == "" {
			return nil, invalid(pp+".function.name", "name is required")
		}
		input, err := toolInput(tc.Function.Arguments, pp+".function.arguments")
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, msgBlock{Type: "tool_use", ID: id, Name: tc.Function.Name, Input: input})
	}
	return blocks, nil
}

var emptyObject = json.RawMessage(`{}`)

// toolInput turns tool call arguments (a string of JSON, or the object
// itself) into Anthropic's input object. Empty arguments are {}.
func toolInput(raw json.RawMessage, param string) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return emptyObject, nil
	}
	args := raw
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(param, "must be a string")
		}
		args = bytes.TrimSpace([]byte(s))
		if len(args) == 0 {
			return emptyObject, nil
		}
		if !json.Valid(args) {
			return nil, invalid(param, "is not valid JSON")
		}
	}
	if !isJSONObject(args) {
		return nil, invalid(param, "must be a JSON object")
	}
	return args, nil
}

// ToolID makes a tool call id acceptable to Anthropic, which allows only
// [a-zA-Z0-9_-]: other bytes become '_'. The same mapping applies to
// tool_call_id (a Messages tool result's tool_use_id), so calls and
// results still pair up.
func ToolID(id string) string {
	for i := 0; i < len(id); i++ {
		if !ToolIDByte(id[i]) {
			b := []byte(id)
			for j := i; j < len(b); j++ {
				if !ToolIDByte(b[j]) {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return id
}

// ToolIDByte reports whether c may stand in a tool id Anthropic takes
// ([a-zA-Z0-9_-]).
func ToolIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func toolResult(m *chatMessage, param string) (msgBlock, error) {
	id := ToolID(m.ToolCallID)
	if id == "" {
		return msgBlock{}, invalid(param+".tool_call_id", "tool_call_id is required")
	}
	blocks, err := textBlocks(m.Content, param+".content")
	if err != nil {
		return msgBlock{}, err
	}
	return msgBlock{Type: "tool_result", ToolUseID: id, Content: blocks}, nil
}

var defaultInputSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// convertTools converts function tools, tool_choice and
// parallel_tool_calls.
func convertTools(out *msgRequest, in *chatRequest) error {
	for i := range in.Tools {
		t := &in.Tools[i]
		param := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "function" && t.Type != "" {
			return invalid(param+".type", "tool type "+strconv.Quote(t.Type)+" is not supported by this model's provider")
		}
		if t.Function == nil || t.Function.Name == "" {
			return invalid(param+".function.name", "name is required")
		}
		schema, err := inputSchema(t.Function.Parameters, param+".function.parameters")
		if err != nil {
			return err
		}
		cc, err := cacheControl(t.CacheControl, param)
		if err != nil {
			return err
		}
		out.Tools = append(out.Tools, msgTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema, CacheControl: cc})
	}
	choice, err := toolChoice(in.ToolChoice)
	if err != nil {
		return err
	}
	if len(out.Tools) == 0 {
		return nil // a choice among no tools: Anthropic would refuse it
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
		if choice == nil {
			choice = &msgToolChoice{Type: "auto"}
		}
		if choice.Type != "none" {
			choice.DisableParallelToolUse = true
		}
	}
	out.ToolChoice = choice
	return nil
}

// inputSchema is the function's parameters; Anthropic insists on an object
// schema with a type, so a missing schema or type is filled in.
func inputSchema(raw json.RawMessage, param string) (json.RawMessage, error) {
	if isNull(raw) {
		return defaultInputSchema, nil
	}
	if !isJSONObject(raw) {
		return nil, invalid(param, "must be a JSON Schema object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, invalid(param, "must be a JSON Schema object")
	}
	if _, ok := fields["type"]; ok {
		return raw, nil
	}
	fields["type"] = json.RawMessage(`"object"`)
	b, err := marshal(fields)
	if err != nil {
		return nil, invalid(param, "must be a JSON Schema object")
	}
	return b, nil
}

func toolChoice(raw json.RawMessage) (*msgToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		switch rawString(raw) {
		case "auto":
			return &msgToolChoice{Type: "auto"}, nil
		case "none":
			return &msgToolChoice{Type: "none"}, nil
		case "required":
			return &msgToolChoice{Type: "any"}, nil
		}
		return nil, invalid("tool_choice", `must be "auto", "none", "required" or a named function`)
	}
	var v struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &v) != nil || v.Type != "function" || v.Function.Name == "" {
		return nil, invalid("tool_choice", `must be "auto", "none", "required" or {"type":"function","function":{"name":...}}`)
	}
	return &msgToolChoice{Type: "tool", Name: v.Function.Name}, nil
}
