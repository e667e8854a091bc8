package translate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Anthropic Messages requests to OpenAI Chat Completions requests, for
// /v1/messages callers whose model lives on an OpenAI-shaped upstream.

// inMsgRequest is a /v1/messages request as a client sends it. Content and
// system are a string or a list of blocks.
type inMsgRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int64          `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []inMsgMessage  `json:"messages"`
	Tools         []inMsgTool     `json:"tools"`
	ToolChoice    *msgToolChoice  `json:"tool_choice"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Stream        bool            `json:"stream"`
	Metadata      *msgMetadata    `json:"metadata"`
	Thinking      *msgThinking    `json:"thinking"`
	OutputConfig  *struct {
		Effort string          `json:"effort"`
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	// OutputFormat is the structured-outputs beta's spelling of
	// output_config.format.
	OutputFormat json.RawMessage `json:"output_format"`
}

type inMsgMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type inMsgBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    *inMsgSource    `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Title     string          `json:"title"`
	Context   string          `json:"context"`
	ToolName  string          `json:"tool_name"`
	// Tool is what a system message's tool_addition or tool_removal
	// changes.
	Tool *msgToolChange `json:"tool"`
	// Thinking is a thinking block's text.
	Thinking string `json:"thinking"`
}

// inMsgSource is a block's source: an image's or a document's object, or
// the string naming where a search result came from (Name).
type inMsgSource struct {
	msgSource
	Name string
}

func (s *inMsgSource) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &s.Name)
	}
	return json.Unmarshal(b, &s.msgSource)
}

// msgToolChange is the tool of a tool_addition (by reference, or defined
// inline) or a tool_removal (by reference).
type msgToolChange struct {
	Type       string     `json:"type"`
	Name       string     `json:"name"`
	Definition *inMsgTool `json:"definition"`
}

type inMsgTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Strict holds the tool's arguments to its schema.
	Strict bool `json:"strict"`
	// DeferLoading is a tool the model is not shown until something loads
	// it (loadDeferred).
	DeferLoading bool `json:"defer_loading"`
}

// Outgoing chat request, only what this translator writes.
type outChatRequest struct {
	Model             string            `json:"model"`
	Messages          []outChatMessage  `json:"messages"`
	MaxTokens         *int64            `json:"max_tokens,omitempty"`
	MaxCompletion     *int64            `json:"max_completion_tokens,omitempty"`
	Temperature       *float64          `json:"temperature,omitempty"`
	TopP              *float64          `json:"top_p,omitempty"`
	Stop              []string          `json:"stop,omitempty"`
	Stream            bool              `json:"stream,omitempty"`
	StreamOptions     *outStreamOptions `json:"stream_options,omitempty"`
	Tools             []outChatTool     `json:"tools,omitempty"`
	ToolChoice        any               `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
	ReasoningEffort   string            `json:"reasoning_effort,omitempty"`
	ResponseFormat    any               `json:"response_format,omitempty"`
	User              string            `json:"user,omitempty"`
}

type outStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type outChatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
	// Reasoning is an assistant message's reasoning, sent back where
	// ChatOptions.ReasoningBack says (backReasoning).
	Reasoning  *string           `json:"reasoning_content,omitempty"`
	ToolCalls  []outChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

type outChatPart struct {
	Type     string            `json:"type"`
	Text     string            `json:"text,omitempty"`
	ImageURL *outChatImageURL  `json:"image_url,omitempty"`
	File     map[string]string `json:"file,omitempty"`
}

type outChatImageURL struct {
	URL string `json:"url"`
	// Detail is an image's detail (low, high, auto), which Responses and
	// Chat Completions both take.
	Detail string `json:"detail,omitempty"`
}

type outChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type outChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		// Strict is sent when a request asks for strict arguments.
		// Omitted, the Responses API is strict where the schema allows
		// and Chat Completions is not, so it is left to the upstream (a
		// strict the schema does not allow is a 400).
		Strict bool `json:"strict,omitempty"`
	} `json:"function"`
}

// ChatOptions are what a translated chat.completions request must fit of
// its upstream.
type ChatOptions struct {
	// MaxCompletionTokens sends the output cap as max_completion_tokens, not
	// max_tokens: OpenAI's reasoning models (o-series, gpt-5) refuse
	// max_tokens, and OpenAI takes max_completion_tokens for every model;
	// other OpenAI-shaped servers may know only max_tokens.
	MaxCompletionTokens bool
	// ToolResultImages sends the images of Anthropic tool results on, in a
	// user message after the tool messages (which hold text only); without
	// it (a model that may not take images) they are noted as [image].
	ToolResultImages bool
	// Reasons is true when the upstream model is known to reason: a
	// Messages thinking budget is sent as reasoning_effort. Without it
	// thinking is left out, since a model that does not reason answers 400
	// to reasoning_effort.
	Reasons bool
	// MaxStopSequences is the most stop sequences the upstream takes (0: no
	// known limit). A Messages request with more, after duplicates, is
	// refused: Anthropic takes more, and sending fewer would let the answer
	// run past a sequence the client stops at.
	MaxStopSequences int
	// ReasoningBack sends an earlier turn's reasoning (a Messages thinking
	// block's text, a Responses reasoning item's) back as its assistant
	// message's reasoning_content: DeepSeek's thinking mode answers 400 to
	// a tool call's turn without it ("The reasoning_content in the
	// thinking mode must be passed back to the API."), and Kimi's thinking
	// models reason better with it. Without it reasoning is left out.
	ReasoningBack bool
}

// setCap sets out's output cap to n in the member the upstream takes.
func (o ChatOptions) setCap(out *outChatRequest, n *int64) {
	if o.MaxCompletionTokens {
		out.MaxCompletion = n
	} else {
		out.MaxTokens = n
	}
}

// AnthropicToOpenAIRequest translates a /v1/messages request body into a
// chat.completions request for upstreamModel. Streams ask for usage. Tool
// results become tool messages placed right after the assistant's calls;
// thinking blocks of earlier turns are dropped (Chat Completions has no
// place for them) unless opts.ReasoningBack sends them back as the
// reasoning_content of their assistant message (backReasoning); the effort (output_config.effort, else the thinking
// budget's) becomes reasoning_effort only where opts.Reasons says the model
// reasons; server tools the upstream cannot run are refused; deferred tools
// are sent once loaded (loadDeferred).
func AnthropicToOpenAIRequest(body []byte, upstreamModel string, opts ChatOptions) ([]byte, error) {
	var in inMsgRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, decodeError(err)
	}
	out := outChatRequest{
		Model: upstreamModel, Temperature: in.Temperature, TopP: in.TopP,
		Stream: in.Stream,
	}
	stop, err := chatStop(in.StopSequences, opts.MaxStopSequences)
	if err != nil {
		return nil, err
	}
	out.Stop = stop
	opts.setCap(&out, in.MaxTokens)
	if opts.Reasons {
		out.ReasoningEffort = thinkingEffort(in.Thinking)
		if in.OutputConfig != nil {
			if e := outputEffort(in.OutputConfig.Effort); e != "" {
				out.ReasoningEffort = e
			}
		}
	}
	if in.Stream {
		out.StreamOptions = &outStreamOptions{IncludeUsage: true}
	}
	format, param := in.OutputFormat, "output_format"
	if in.OutputConfig != nil && len(in.OutputConfig.Format) > 0 && !isNull(in.OutputConfig.Format) {
		format, param = in.OutputConfig.Format, "output_config.format"
	}
	if out.ResponseFormat, err = chatResponseFormat(format, param); err != nil {
		return nil, err
	}
	if system, err := systemText(in.System); err != nil {
		return nil, err
	} else if system != "" {
		out.Messages = append(out.Messages, outChatMessage{Role: "system", Content: system})
	}
	tools, removed, err := toolsAfterChanges(in.Tools, in.Messages)
	if err != nil {
		return nil, err
	}
	loadDeferred(tools, in.Messages, in.ToolChoice)
	for i, m := range in.Messages {
		param := "messages[" + strconv.Itoa(i) + "]"
		msgs, err := chatMessagesOf(m, param, opts, tools)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	if opts.ReasoningBack {
		backReasoning(out.Messages)
	}
	// Server tools have no Chat Completions counterpart: left out when
	// the request offers tools of its own too, refused when they are all
	// it offers or tool_choice names one (see doc.go).
	firstServer, serverNames := -1, map[string]bool{}
	for i, t := range tools {
		if t.Type != "" && t.Type != "custom" {
			if firstServer < 0 {
				firstServer = i
			}
			serverNames[t.Name] = true
			continue
		}
		if removed[t.Name] || t.DeferLoading {
			continue
		}
		var ct outChatTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description = t.Name, t.Description
		ct.Function.Parameters, ct.Function.Strict = t.InputSchema, t.Strict
		out.Tools = append(out.Tools, ct)
	}
	if firstServer >= 0 && len(out.Tools) == 0 {
		// One a system message's tool_addition defined follows the
		// request's own tools.
		param := "messages"
		if firstServer < len(in.Tools) {
			param = "tools[" + strconv.Itoa(firstServer) + "].type"
		}
		return nil, invalid(param, "the server tool "+strconv.Quote(tools[firstServer].Type)+" is not available on this model's upstream")
	}
	if tc := in.ToolChoice; tc != nil && tc.Type == "tool" && serverNames[tc.Name] {
		return nil, invalid("tool_choice.name", "the server tool "+strconv.Quote(tc.Name)+" is not available on this model's upstream")
	}
	if tc := in.ToolChoice; tc != nil {
		choice, err := chatToolChoice(tc, out.Tools)
		if err != nil {
			return nil, err
		}
		out.ToolChoice = choice
		if tc.DisableParallelToolUse && len(out.Tools) > 0 {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	return marshal(out)
}

// toolsAfterChanges are the request's tools with those its mid-conversation
// system messages define inline (tool_addition of a tool_definition) after
// them, and removed the names whose last change is a tool_removal. Chat
// Completions declares a conversation's tools once, so a chat upstream gets
// those the conversation ends with; a tool added by reference is among the
// request's tools already (deferred, as Anthropic wants it), and loaded.
func toolsAfterChanges(tools []inMsgTool, msgs []inMsgMessage) ([]inMsgTool, map[string]bool, error) {
	var removed map[string]bool
	for i, m := range msgs {
		if m.Role != "system" || !bytes.Contains(m.Content, []byte(`"tool"`)) {
			continue
		}
		param := "messages[" + strconv.Itoa(i) + "].content"
		blocks, err := blocksOf(m.Content, param)
		if err != nil {
			return nil, nil, err
		}
		for j, b := range blocks {
			if b.Type != "tool_addition" && b.Type != "tool_removal" {
				continue
			}
			bp := param + "[" + strconv.Itoa(j) + "].tool"
			c := b.Tool
			name := ""
			switch {
			case c == nil:
			case c.Type == "tool_reference":
				name = c.Name
			case c.Type == "tool_definition" && b.Type == "tool_addition" && c.Definition != nil:
				name = c.Definition.Name
			}
			if name == "" {
				if b.Type == "tool_addition" {
					return nil, nil, invalid(bp, "a tool_addition needs a tool_reference with a name or a tool_definition")
				}
				return nil, nil, invalid(bp, "a tool_removal needs a tool_reference with a name")
			}
			if b.Type == "tool_removal" {
				if removed == nil {
					removed = map[string]bool{}
				}
				removed[name] = true
				continue
			}
			delete(removed, name)
			if c.Type == "tool_reference" {
				for k := range tools {
					if tools[k].Name == name {
						tools[k].DeferLoading = false
					}
				}
			}
			if c.Type == "tool_definition" && !slices.ContainsFunc(tools, func(t inMsgTool) bool { return t.Name == name }) {
				tools = append(slices.Clip(tools), *c.Definition) // never into the request's own array
			}
		}
	}
	return tools, removed, nil
}

// loadDeferred marks loaded (DeferLoading false) the deferred tools the
// model may see and call. Anthropic shows its model a deferred tool only
// once a tool_reference in a tool result names it (Claude Code defers its
// MCP tools, WebFetch and the like, and its ToolSearch answers with such
// references) or tool_choice forces it; the others, among them Claude
// Code's DeferredToolPlaceholder that no one may call, stay out of a chat
// upstream's tools, so the user does not pay for every definition on every
// turn. With Anthropic's own tool search tool among the tools (a server
// tool, which no chat upstream runs) nothing could ever load them: all are
// loaded, as if the request deferred none.
func loadDeferred(tools []inMsgTool, msgs []inMsgMessage, tc *msgToolChoice) {
	load := map[string]bool{}
	for _, t := range tools {
		if strings.HasPrefix(t.Type, "tool_search_tool_") {
			for i := range tools {
				tools[i].DeferLoading = false
			}
			return
		}
	}
	if tc != nil && tc.Type == "tool" {
		load[tc.Name] = true
	}
	for _, m := range msgs {
		if m.Role != "user" || !bytes.Contains(m.Content, []byte(`"tool_reference"`)) {
			continue
		}
		blocks, err := blocksOf(m.Content, "")
		if err != nil {
			continue // refused when the message is translated
		}
		for _, b := range blocks {
			if b.Type != "tool_result" || len(b.Content) == 0 {
				continue
			}
			refs, err := blocksOf(b.Content, "")
			if err != nil {
				continue
			}
			for _, r := range refs {
				if r.Type == "tool_reference" {
					load[r.ToolName] = true
				}
			}
		}
	}
	for i := range tools {
		if load[tools[i].Name] {
			tools[i].DeferLoading = false
		}
	}
}

// backReasoning completes the reasoning_content of a conversation's
// assistant messages once some carry reasoning: an assistant message with
// tool calls and none gets an empty one, since DeepSeek refuses a tool
// call's turn whose reasoning_content is missing even when it reasoned
// nothing. A conversation without any reasoning is left as it is: strict
// servers (Mistral) refuse members they do not know.
func backReasoning(msgs []outChatMessage) {
	if !slices.ContainsFunc(msgs, func(m outChatMessage) bool { return m.Reasoning != nil }) {
		return
	}
	for i := range msgs {
		if m := &msgs[i]; m.Role == "assistant" && m.Reasoning == nil && len(m.ToolCalls) > 0 {
			m.Reasoning = new(string)
		}
	}
}

// chatStop is the stop sequences sent to a chat upstream that takes at
// most limit of them (0: no known limit), each once.
func chatStop(seqs []string, limit int) ([]string, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(seqs))
	for _, s := range seqs {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if limit > 0 && len(out) > limit {
		return nil, invalid("stop_sequences", "this model's upstream takes at most "+strconv.Itoa(limit)+" stop sequences; the request has "+strconv.Itoa(len(out)))
	}
	return out, nil
}

// thinkingEffort is the reasoning effort of a Messages thinking setting
// ("": none sent). An enabled budget maps to the effort it pays for. With
// adaptive thinking the model decides how much to think, as a reasoning
// model does at its default effort (unless output_config.effort says how
// hard, see outputEffort); disabled thinking, like none, leaves
// the upstream's default too, since the models that always reason refuse
// an effort of none. A type Messages may add later reads as none.
func thinkingEffort(t *msgThinking) string {
	if t == nil || t.Type != "enabled" {
		return ""
	}
	return reasoningEffort(t.BudgetTokens)
}

// chatResponseFormat is a Messages structured-output format (output_config
// .format) as a chat response_format (nil: none asked for): a JSON schema
// format of that schema. Not strict: OpenAI's strict mode refuses schemas
// Anthropic takes (an optional property, one left out of required).
func chatResponseFormat(raw json.RawMessage, param string) (any, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return nil, invalid(param, "the output format must be an object with a type")
	}
	if f.Type != "json_schema" {
		return nil, invalid(param+".type", "unknown output format type "+strconv.Quote(f.Type))
	}
	if !isJSONObject(f.Schema) {
		return nil, invalid(param+".schema", "a json_schema output format needs a schema object")
	}
	return map[string]any{"type": "json_schema", "json_schema": map[string]any{
		"name": "output", "schema": f.Schema, "strict": false}}, nil
}

// outputEffort is the reasoning effort of a Messages output_config.effort
// (Claude Code's effort setting, sent with adaptive thinking): the client's
// own choice of how hard the model works, so it wins over a thinking
// budget. xhigh and max are high, the highest every reasoning model takes
// (reasoningEfforts); an effort Messages may add later is none ("").
func outputEffort(effort string) string {
	switch effort {
	case "low", "medium", "high":
		return effort
	case "xhigh", "max":
		return "high"
	}
	return ""
}

// chatToolChoice is a Messages tool_choice as Chat Completions has it, for
// a request offering tools (nil: none is sent). OpenAI refuses tool_choice
// without tools ("'tool_choice' is only allowed when 'tools' are
// specified"), so with none left auto and none, which ask nothing a request
// without tools does not already do, are left out. A choice that forces a
// call cannot be answered without the tool: any with no tools, and a tool
// the request does not offer, are refused, as Anthropic refuses them.
func chatToolChoice(tc *msgToolChoice, tools []outChatTool) (any, error) {
	switch tc.Type {
	case "auto", "none":
		if len(tools) == 0 {
			return nil, nil
		}
		return tc.Type, nil
	case "any":
		if len(tools) == 0 {
			return nil, invalid("tool_choice.type", "tool_choice \"any\" needs tools, and the request offers none")
		}
		return "required", nil
	case "tool":
		for _, t := range tools {
			if t.Function.Name == tc.Name {
				return map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}, nil
			}
		}
		return nil, invalid("tool_choice.name", "the tool "+strconv.Quote(tc.Name)+" named by tool_choice is not among the request's tools")
	}
	return nil, invalid("tool_choice.type", "unknown tool_choice type "+strconv.Quote(tc.Type))
}

// systemText reads system as a string or a list of text blocks.
func systemText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []inMsgBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", invalid("system", "system must be a string or a list of text blocks")
	}
	parts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" {
			return "", invalid("system["+strconv.Itoa(i)+"].type", "system blocks must be text")
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n\n"), nil
}

// blocksOf reads content as a string or a list of blocks.
func blocksOf(raw json.RawMessage, param string) ([]inMsgBlock, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []inMsgBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []inMsgBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, invalid(param, "content must be a string or a list of blocks")
	}
	return blocks, nil
}

func chatMessagesOf(m inMsgMessage, param string, opts ChatOptions, tools []inMsgTool) ([]outChatMessage, error) {
	blocks, err := blocksOf(m.Content, param+".content")
	if err != nil {
		return nil, err
	}
	switch m.Role {
	case "system":
		// Mid-conversation system text (Claude Code sends it): a system
		// message at that place. Its tool changes are the request's tools
		// (toolsAfterChanges).
		var text []string
		for i, b := range blocks {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_addition", "tool_removal":
			default:
				return nil, invalid(param+".content["+strconv.Itoa(i)+"].type", "system messages hold text, tool_addition and tool_removal blocks only")
			}
		}
		if len(text) == 0 {
			return nil, nil // tool changes alone
		}
		return []outChatMessage{{Role: "system", Content: strings.Join(text, "\n\n")}}, nil
	case "assistant":
		msg := outChatMessage{Role: "assistant"}
		var text, reasoning strings.Builder
		for i, b := range blocks {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				var call outChatToolCall
				call.ID, call.Type = b.ID, "function"
				call.Function.Name = b.Name
				args := "{}"
				if len(b.Input) > 0 && !isNull(b.Input) {
					args = string(b.Input)
				}
				call.Function.Arguments = args
				msg.ToolCalls = append(msg.ToolCalls, call)
			case "thinking":
				// Joined as an answer's thinking blocks are
				// (AnthropicToOpenAIResponse), kept where ReasoningBack
				// says.
				if opts.ReasoningBack {
					addReasoning(&reasoning, b.Thinking)
				}
			case "redacted_thinking":
				// Encrypted for Anthropic alone: no text to send.
			default:
				return nil, invalid(param+".content["+strconv.Itoa(i)+"].type", "unsupported block type "+strconv.Quote(b.Type)+" in an assistant message")
			}
		}
		if text.Len() > 0 {
			msg.Content = text.String()
		}
		if reasoning.Len() > 0 {
			r := reasoning.String()
			msg.Reasoning = &r
		}
		if msg.Content == nil && len(msg.ToolCalls) == 0 {
			// Thinking alone (or nothing): an assistant message with
			// neither content nor tool calls is refused by OpenAI
			// ("content is required"); there is nothing to carry over.
			return nil, nil
		}
		return []outChatMessage{msg}, nil
	case "user":
		var out []outChatMessage
		var parts []outChatPart
		for i, b := range blocks {
			bp := param + ".content[" + strconv.Itoa(i) + "]"
			switch b.Type {
			case "text":
				parts = append(parts, outChatPart{Type: "text", Text: b.Text})
			case "image":
				url, err := sourceURL(b.Source, bp)
				if err != nil {
					return nil, err
				}
				parts = append(parts, outChatPart{Type: "image_url", ImageURL: &outChatImageURL{URL: url}})
			case "document":
				doc, err := documentParts(b, bp)
				if err != nil {
					return nil, err
				}
				parts = append(parts, doc...)
			case "search_result":
				text, err := searchResultText(b, bp)
				if err != nil {
					return nil, err
				}
				parts = append(parts, outChatPart{Type: "text", Text: text})
			case "tool_result":
				text, media, err := toolResultContent(b.Content, bp+".content", opts.ToolResultImages, tools)
				if err != nil {
					return nil, err
				}
				if b.IsError && !strings.HasPrefix(text, "Error") {
					text = "Error: " + text
				}
				out = append(out, outChatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
				// A tool message holds text only: the result's images and
				// PDFs (a screenshot, an image or a PDF Claude Code read)
				// follow in the user's message after the tool messages,
				// where the model sees them.
				parts = append(parts, media...)
			default:
				return nil, invalid(bp+".type", "unsupported block type "+strconv.Quote(b.Type))
			}
		}
		if len(parts) > 0 {
			if len(parts) == 1 && parts[0].Type == "text" {
				out = append(out, outChatMessage{Role: "user", Content: parts[0].Text})
			} else {
				out = append(out, outChatMessage{Role: "user", Content: parts})
			}
		}
		return out, nil
	}
	return nil, invalid(param+".role", "role must be user, assistant or system")
}

func sourceURL(s *inMsgSource, param string) (string, error) {
	if s == nil {
		return "", invalid(param+".source", "a source is required")
	}
	switch s.Type {
	case "base64":
		return "data:" + s.MediaType + ";base64," + s.Data, nil
	case "url":
		return s.URL, nil
	}
	return "", invalid(param+".source.type", "source type must be base64 or url")
}

// documentParts is a document block as chat parts. A PDF's data is a file
// part (file_data holds base64 data, never a URL); a plain-text document
// (source text, or content made of text and image blocks) is text after its
// title and context. A PDF given by URL cannot be attached: file_data takes
// no URL and the gateway fetches nothing for a client, so the text names
// the URL and says the document is not attached. The conversation goes on
// (a client such as Claude Code resends its history every turn, where a
// refusal would fail every later turn too), and the model, told it has
// only the URL, can say so or fetch it with a tool of its own.
func documentParts(b inMsgBlock, param string) ([]outChatPart, error) {
	s := b.Source
	if s == nil {
		return nil, invalid(param+".source", "a source is required")
	}
	var head []string
	for _, h := range []string{b.Title, b.Context} {
		if h != "" {
			head = append(head, h)
		}
	}
	text := func(body string) outChatPart {
		return outChatPart{Type: "text", Text: strings.Join(append(head, body), "\n\n")}
	}
	switch s.Type {
	case "base64":
		name := b.Title
		if name == "" {
			name = "document.pdf"
		}
		data, err := sourceURL(s, param)
		if err != nil {
			return nil, err
		}
		return []outChatPart{{Type: "file", File: map[string]string{"file_data": data, "filename": name}}}, nil
	case "text":
		return []outChatPart{text(s.Data)}, nil
	case "url":
		return []outChatPart{text("[document not attached, only its URL: " + s.URL + "]")}, nil
	case "content":
		blocks, err := blocksOf(s.Content, param+".source.content")
		if err != nil {
			return nil, err
		}
		var body []string
		var images []outChatPart
		for i, blk := range blocks {
			switch blk.Type {
			case "text":
				body = append(body, blk.Text)
			case "image":
				url, err := sourceURL(blk.Source, param+".source.content["+strconv.Itoa(i)+"]")
				if err != nil {
					return nil, err
				}
				images = append(images, outChatPart{Type: "image_url", ImageURL: &outChatImageURL{URL: url}})
			default:
				return nil, invalid(param+".source.content["+strconv.Itoa(i)+"].type", "a document's content holds text and image blocks")
			}
		}
		return append([]outChatPart{text(strings.Join(body, "\n\n"))}, images...), nil
	}
	return nil, invalid(param+".source.type", "a document's source type must be base64, text, content or url")
}

// searchResultText is a search result block (a RAG tool's answer, or
// sources an app hands the model) as the model reads it: its title, its
// source and its text blocks.
func searchResultText(b inMsgBlock, param string) (string, error) {
	var text []string
	if b.Title != "" {
		text = append(text, b.Title)
	}
	if b.Source != nil && b.Source.Name != "" {
		text = append(text, b.Source.Name)
	}
	if len(b.Content) > 0 && !isNull(b.Content) {
		blocks, err := blocksOf(b.Content, param+".content")
		if err != nil {
			return "", err
		}
		for i, blk := range blocks {
			if blk.Type != "text" {
				return "", invalid(param+".content["+strconv.Itoa(i)+"].type", "a search result's content holds text blocks")
			}
			text = append(text, blk.Text)
		}
	}
	return strings.Join(text, "\n\n"), nil
}

// toolResultContent flattens a tool result's content (a string, or text,
// image, document, search_result and tool_reference blocks) to text. With
// media, it returns the images and PDFs it can send as parts of their own
// and the text says where they went; one it cannot send (no media wanted,
// or a source it cannot read) is noted as [image] or [document]. A
// plain-text document (Claude Code reading a text file as one) is text in
// the result, and so is a search result (searchResultText). Tool
// references (Claude Code's ToolSearch answers with them) are the
// referenced tools' definitions, among tools, in a <functions> block, as
// Anthropic shows them to its model.
func toolResultContent(raw json.RawMessage, param string, media bool, tools []inMsgTool) (string, []outChatPart, error) {
	if len(raw) == 0 || isNull(raw) {
		return "", nil, nil
	}
	blocks, err := blocksOf(raw, param)
	if err != nil {
		return "", nil, err
	}
	var b bytes.Buffer
	var parts []outChatPart
	inFunctions := false // a <functions> block of tool references is open
	for i, blk := range blocks {
		if inFunctions && blk.Type != "tool_reference" {
			b.WriteString("\n</functions>")
			inFunctions = false
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		bp := param + "[" + strconv.Itoa(i) + "]"
		switch blk.Type {
		case "text":
			b.WriteString(blk.Text)
		case "search_result":
			text, err := searchResultText(blk, bp)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(text)
		case "tool_reference":
			if !inFunctions {
				b.WriteString("<functions>\n")
				inFunctions = true
			}
			b.WriteString("<function>")
			b.Write(toolDefinition(blk.ToolName, tools))
			b.WriteString("</function>")
		case "image":
			if url, err := sourceURL(blk.Source, bp); media && err == nil {
				parts = append(parts, outChatPart{Type: "image_url", ImageURL: &outChatImageURL{URL: url}})
				b.WriteString("[image: in the next user message]")
			} else {
				b.WriteString("[image]")
			}
		case "document":
			doc, err := documentParts(blk, bp)
			if err != nil {
				b.WriteString("[document]")
				continue
			}
			for j, p := range doc {
				if j > 0 {
					b.WriteByte('\n')
				}
				switch {
				case p.Type == "text":
					b.WriteString(p.Text)
				case media:
					parts = append(parts, p)
					b.WriteString("[" + strings.TrimSuffix(p.Type, "_url") + ": in the next user message]")
				default:
					b.WriteString("[document]")
				}
			}
		}
	}
	if inFunctions {
		b.WriteString("\n</functions>")
	}
	return b.String(), parts, nil
}

// toolDefinition is the definition of the tool named name among tools as
// JSON ({"description","name","parameters"}, the shape of a function the
// model is shown), or only its name when the request does not offer it.
func toolDefinition(name string, tools []inMsgTool) []byte {
	def := struct {
		Description string          `json:"description,omitempty"`
		Name        string          `json:"name"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}{Name: name}
	for _, t := range tools {
		if t.Name == name && (t.Type == "" || t.Type == "custom") {
			def.Description = t.Description
			if !isNull(t.InputSchema) {
				def.Parameters = t.InputSchema
			}
			break
		}
	}
	b, err := marshal(def)
	if err != nil {
		b, _ = marshal(struct {
			Name string `json:"name"`
		}{name})
	}
	return b
}

// namesReasoning reports whether raw, an upstream's refusal, names
// reasoning_content. DeepSeek writes the member's name in backticks
// ("Missing `reasoning_content` field").
func namesReasoning(raw []byte) bool {
	return bytes.Contains(refusalSaid(raw), []byte("reasoning_content"))
}

func refusalSaid(raw []byte) []byte { return bytes.ToLower(bytes.ReplaceAll(raw, []byte("`"), nil)) }

// ReasoningWanted reports whether raw, an upstream's refusal, says the
// reasoning_content of earlier turns is wanted back (DeepSeek: "must be
// passed back", "Missing reasoning_content").
func ReasoningWanted(raw []byte) bool {
	said := refusalSaid(raw)
	return bytes.Contains(said, []byte("reasoning_content")) &&
		(bytes.Contains(said, []byte("passed back")) || bytes.Contains(said, []byte("missing reasoning_content")))
}

// WithoutRefusedReasoning is body, a chat request whose assistant messages
// carry reasoning_content (ChatOptions.ReasoningBack), without that member,
// when raw, the upstream's refusal, says it takes no such member (Groq and
// Cerebras: "property 'reasoning_content' is unsupported"; strict schemas:
// "Additional properties are not allowed", "Extra inputs are not
// permitted", each naming the member), and not that it wants it (DeepSeek:
// "must be passed back", "Missing reasoning_content"). ok is false
// otherwise, and when no message carried the member.
func WithoutRefusedReasoning(body, raw []byte) (out []byte, ok bool) {
	if !namesReasoning(raw) || ReasoningWanted(raw) {
		return nil, false
	}
	var req map[string]json.RawMessage
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["messages"], &msgs) != nil {
		return nil, false
	}
	for _, m := range msgs {
		if _, had := m["reasoning_content"]; had {
			delete(m, "reasoning_content")
			ok = true
		}
	}
	if !ok {
		return nil, false
	}
	var err error
	if req["messages"], err = marshal(msgs); err != nil {
		return nil, false
	}
	if out, err = marshal(req); err != nil {
		return nil, false
	}
	return out, true
}
