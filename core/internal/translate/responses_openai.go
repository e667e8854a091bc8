package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// OpenAI Responses requests to Chat Completions requests, for /v1/responses
// callers whose model lives on an upstream without the Responses API (and,
// through OpenAIToAnthropicRequest, on Anthropic-shaped ones).

type respRequest struct {
	Model             string          `json:"model"`
	Instructions      *string         `json:"instructions"`
	Input             json.RawMessage `json:"input"`
	Tools             []respTool      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	MaxOutputTokens   *int64          `json:"max_output_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	Stream            bool            `json:"stream"`
	Reasoning         *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Text *struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	User string `json:"user"`
}

type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	// Format is a custom tool's input format: text, or a grammar.
	Format *struct {
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"`
}

// customParameters is the parameters schema of a custom tool sent as a
// function: its freeform input is the one string argument, described by
// the grammar it follows when it has one.
func (t respTool) customParameters() json.RawMessage {
	input := map[string]string{"type": "string", "description": "The tool's input, as free text."}
	if f := t.Format; f != nil && f.Type == "grammar" && f.Definition != "" {
		input["description"] = "The tool's input, following this " + f.Syntax + " grammar:\n" + f.Definition
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"input": input},
		"required": []string{"input"}, "additionalProperties": false})
	return b
}

// customArguments are the arguments of a custom tool's call sent as a
// function call: its input as the one argument.
func customArguments(input string) string {
	b, _ := json.Marshal(map[string]string{"input": input})
	return string(b)
}

// respItem is an input item: a message (type "message" or none), a
// function or custom tool call, a call's output, or reasoning.
type respItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
	Namespace string          `json:"namespace"`
	// Summary is a reasoning item's summary; its content (Content) holds
	// reasoning_text parts.
	Summary []respPart `json:"summary"`
}

type respPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
}

// ResponsesToOpenAIRequest translates a /v1/responses request body into a
// chat.completions request for upstreamModel. Custom tools become functions
// whose one argument is their input (the answer's calls of them are custom
// tool calls again: Echo). Other tools (hosted tools such as web_search,
// Codex's namespaces) have no counterpart: they are left out beside
// functions and refused alone, as Messages' server tools are
// (AnthropicToOpenAIRequest).
func ResponsesToOpenAIRequest(body []byte, upstreamModel string, opts ChatOptions) ([]byte, error) {
	var in respRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, decodeError(err)
	}
	out := &outChatRequest{Model: upstreamModel, Temperature: in.Temperature,
		TopP: in.TopP, Stream: in.Stream, ParallelToolCalls: in.ParallelToolCalls, User: in.User}
	opts.setCap(out, in.MaxOutputTokens)
	if in.Stream {
		out.StreamOptions = &outStreamOptions{IncludeUsage: true}
	}
	if in.Reasoning != nil {
		out.ReasoningEffort = in.Reasoning.Effort
	}
	if in.Instructions != nil && *in.Instructions != "" {
		out.Messages = append(out.Messages, outChatMessage{Role: "system", Content: *in.Instructions})
	}
	msgs, err := respInput(in.Input, opts.ToolResultImages, opts.ReasoningBack)
	if err != nil {
		return nil, err
	}
	if opts.ReasoningBack {
		backReasoning(msgs)
	}
	out.Messages = append(out.Messages, msgs...)
	// Hosted tools have no Chat Completions counterpart: left out when the
	// request offers functions too (Codex offers web_search with every
	// turn), refused when they are all it offers (see doc.go).
	firstHosted := -1
	for i, t := range in.Tools {
		if t.Type != "function" && t.Type != "custom" {
			if firstHosted < 0 {
				firstHosted = i
			}
			continue
		}
		var ct outChatTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters = t.Name, t.Description, t.Parameters
		ct.Function.Strict = t.Type == "function" && t.Strict != nil && *t.Strict
		if t.Type == "custom" {
			ct.Function.Parameters = t.customParameters()
		}
		out.Tools = append(out.Tools, ct)
	}
	if firstHosted >= 0 && len(out.Tools) == 0 {
		return nil, invalid("tools["+strconv.Itoa(firstHosted)+"].type", "the hosted tool "+strconv.Quote(in.Tools[firstHosted].Type)+" is not available on this model's upstream")
	}
	if len(out.Tools) == 0 {
		out.ParallelToolCalls = nil
	}
	if len(in.ToolChoice) > 0 && !isNull(in.ToolChoice) && len(out.Tools) > 0 {
		var s string
		var obj struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		switch {
		case json.Unmarshal(in.ToolChoice, &s) == nil:
			out.ToolChoice = s
		case json.Unmarshal(in.ToolChoice, &obj) == nil && (obj.Type == "function" || obj.Type == "custom"):
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": obj.Name}}
		default:
			return nil, invalid("tool_choice", "tool_choice must be none, auto, required or a function")
		}
	}
	if in.Text != nil && in.Text.Format != nil && in.Text.Format.Type != "text" {
		f := in.Text.Format
		switch f.Type {
		case "json_object":
			out.ResponseFormat = map[string]string{"type": "json_object"}
		case "json_schema":
			// Both are required, as the Responses API says (a chat
			// upstream would refuse the name's absence in its own words).
			if f.Name == "" {
				return nil, invalid("text.format.name", "Missing required parameter: 'text.format.name'.")
			}
			if isNull(f.Schema) {
				return nil, invalid("text.format.schema", "Missing required parameter: 'text.format.schema'.")
			}
			schema := map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}
			if f.Description != "" {
				schema["description"] = f.Description
			}
			out.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": schema}
		default:
			return nil, invalid("text.format.type", "unknown text format "+strconv.Quote(f.Type))
		}
	}
	return marshal(out)
}

// respInput reads input: a string (one user message) or a list of items.
// The images and files of function call outputs follow the tool messages
// in a user message when media is true (a tool message holds text only),
// and are noted in their tool message's text otherwise. An output without
// a call_id (Codex sends some so) answers the earliest call of its name
// still waiting for an output, or else joins that user message as text
// naming the tool: a tool message needs the id of its call. With reasoning,
// a reasoning item's text (its summary's, then its reasoning_text's, each
// a paragraph, as ResponsesToOpenAIResponse joins them) is the
// reasoning_content of the turn's next assistant message, the one holding
// its text or calls; without, reasoning is left out.
func respInput(raw json.RawMessage, media, reasoning bool) ([]outChatMessage, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []outChatMessage{{Role: "user", Content: s}}, nil
	}
	var items []respItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("input", "input must be a string or a list of items")
	}
	var out []outChatMessage
	var pending []outChatPart   // the media of the tool messages last added
	var thought strings.Builder // reasoning for the next assistant message
	// think gives m the reasoning read since the last assistant message.
	think := func(m *outChatMessage) {
		if thought.Len() == 0 {
			return
		}
		var r strings.Builder
		if m.Reasoning != nil {
			r.WriteString(*m.Reasoning)
		}
		addReasoning(&r, thought.String())
		joined := r.String()
		m.Reasoning = &joined
		thought.Reset()
	}
	answered := map[string]bool{}
	for i, it := range items {
		param := "input[" + strconv.Itoa(i) + "]"
		// The media wait for the turn's last tool message: reasoning,
		// which sends nothing, does not end the turn.
		if it.Type != "function_call_output" && it.Type != "custom_tool_call_output" && it.Type != "reasoning" && len(pending) > 0 {
			out = append(out, outChatMessage{Role: "user", Content: pending})
			pending = nil
		}
		switch it.Type {
		case "", "message":
			m, err := respMessage(it, param)
			if err != nil {
				return nil, err
			}
			if m.Role == "assistant" {
				think(&m)
			} else {
				thought.Reset() // a turn that ended in reasoning alone
			}
			out = append(out, m)
		case "function_call", "custom_tool_call":
			var call outChatToolCall
			call.ID, call.Type = it.CallID, "function"
			call.Function.Name = it.Name
			call.Function.Arguments = it.Arguments
			if it.Type == "custom_tool_call" {
				call.Function.Arguments = customArguments(it.Input)
			}
			if call.Function.Arguments == "" {
				call.Function.Arguments = "{}"
			}
			// Calls of one turn join one assistant message.
			if n := len(out); n == 0 || out[n-1].Role != "assistant" {
				out = append(out, outChatMessage{Role: "assistant"})
			}
			m := &out[len(out)-1]
			m.ToolCalls = append(m.ToolCalls, call)
			think(m)
		case "function_call_output", "custom_tool_call_output":
			text, parts, err := respOutputContent(it.Output, param+".output", media)
			if err != nil {
				return nil, err
			}
			id := it.CallID
			if id == "" {
				id = waitingCall(out, answered, it.Name)
			}
			if id == "" {
				name := it.Name
				if it.Namespace != "" {
					name = it.Namespace + "." + name
				}
				pending = append(pending, outChatPart{Type: "text", Text: "Output of the tool " + name + ":\n" + text})
				pending = append(pending, parts...)
				continue
			}
			answered[id] = true
			out = append(out, outChatMessage{Role: "tool", ToolCallID: id, Content: text})
			pending = append(pending, parts...)
		case "reasoning":
			if !reasoning {
				break // the upstream reasons afresh
			}
			var content []respPart // a list for a reasoning item
			_ = json.Unmarshal(it.Content, &content)
			addReasoningItem(&thought, it.Summary, content)
		default:
			return nil, invalid(param+".type", "unsupported input item type "+strconv.Quote(it.Type))
		}
	}
	if len(pending) > 0 {
		out = append(out, outChatMessage{Role: "user", Content: pending})
	}
	return out, nil
}

// waitingCall is the id of the earliest call named name in out that no
// tool message answers; "" when there is none.
func waitingCall(out []outChatMessage, answered map[string]bool, name string) string {
	if name == "" {
		return ""
	}
	for _, m := range out {
		for _, c := range m.ToolCalls {
			if c.Function.Name == name && c.ID != "" && !answered[c.ID] {
				return c.ID
			}
		}
	}
	return ""
}

func respMessage(it respItem, param string) (outChatMessage, error) {
	role := it.Role
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system"
	default:
		return outChatMessage{}, invalid(param+".role", "role must be user, assistant, system or developer")
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return outChatMessage{Role: role, Content: s}, nil
	}
	var parts []respPart
	if json.Unmarshal(it.Content, &parts) != nil {
		return outChatMessage{}, invalid(param+".content", "content must be a string or a list of parts")
	}
	var out []outChatPart
	var text strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, outChatPart{Type: "text", Text: p.Text})
			text.WriteString(p.Text)
		case "refusal":
			// An earlier answer's refusal, as a stored response holds it.
			text.WriteString(p.Refusal)
		case "input_image":
			part := p.media()
			if role != "user" || part == nil {
				return outChatMessage{}, invalid(param+".content["+strconv.Itoa(i)+"]", "images need an image_url, in user messages")
			}
			out = append(out, *part)
		case "input_file":
			part := p.media()
			if part == nil {
				return outChatMessage{}, invalid(param+".content["+strconv.Itoa(i)+"]", "files need file_data")
			}
			out = append(out, *part)
		default:
			return outChatMessage{}, invalid(param+".content["+strconv.Itoa(i)+"].type", "unsupported content type "+strconv.Quote(p.Type))
		}
	}
	if role != "user" || len(out) == 1 && out[0].Type == "text" {
		return outChatMessage{Role: role, Content: text.String()}, nil
	}
	return outChatMessage{Role: role, Content: out}, nil
}

// media is an input_image or input_file part as a chat content part; nil
// for another part, or one without its image_url or file_data.
func (p respPart) media() *outChatPart {
	switch {
	case p.Type == "input_image" && p.ImageURL != "":
		return &outChatPart{Type: "image_url", ImageURL: &outChatImageURL{URL: p.ImageURL, Detail: p.Detail}}
	case p.Type == "input_file" && p.FileData != "":
		return &outChatPart{Type: "file", File: map[string]string{"file_data": p.FileData, "filename": p.Filename}}
	}
	return nil
}

// respOutputContent is a function call's output: a string, or parts whose
// text is joined. Its images and files are returned as parts for the user
// message after the tool messages when media is true, and noted in the
// text.
func respOutputContent(raw json.RawMessage, param string, media bool) (string, []outChatPart, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var parts []respPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", nil, invalid(param, "output must be a string or a list of parts")
	}
	var b strings.Builder
	var out []outChatPart
	note := func(kind string, part *outChatPart) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if media && part != nil {
			out = append(out, *part)
			b.WriteString("[" + kind + ": in the next user message]")
			return
		}
		b.WriteString("[" + kind + "]")
	}
	for _, p := range parts {
		switch p.Type {
		case "input_image":
			note("image", p.media())
		case "input_file":
			note("file", p.media())
		default:
			b.WriteString(p.Text)
		}
	}
	return b.String(), out, nil
}
