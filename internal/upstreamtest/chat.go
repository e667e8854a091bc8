package upstreamtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// chatRequest holds the fields of a chat completion request the fake uses.
type chatRequest struct {
	Model     string          `json:"model"`
	MaxTokens json.RawMessage `json:"max_tokens"`
	Messages  []struct {
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		ToolCalls        json.RawMessage `json:"tool_calls"`
		ReasoningContent json.RawMessage `json:"reasoning_content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage       bool  `json:"include_usage"`
		IncludeObfuscation *bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// ThinkingText is the reasoning_content of a chat answer under
// [WithThinkingMode].
const ThinkingText = "The user wants an answer; the tools may help."

// MsgReasoningNotPassedBack is the message of DeepSeek's 400 to a
// thinking-mode request whose tool call's turn lacks its reasoning_content.
const MsgReasoningNotPassedBack = "The `reasoning_content` in the thinking mode must be passed back to the API."

// chatAnswer is what the fake answers to a chat request.
type chatAnswer struct {
	id               string
	created          int64
	model            string
	text             string     // content, when there are no tool calls
	reasoning        string     // the reasoning, "" for none
	reasoningKey     string     // its member: reasoning_content, or reasoning
	calls            []toolCall // tool calls
	promptTokens     int
	completionTokens int
}

func (a *chatAnswer) finishReason() string {
	if len(a.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// serveChat answers POST /v1/chat/completions.
func (s *Server) serveChat(o *output, r *http.Request, body []byte) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAIBadJSON))
		return
	}
	switch {
	case req.Model == "":
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAINoModel))
		return
	case req.Messages == nil:
		o.sendJSON(http.StatusBadRequest, invalidRequest("missing_required_parameter", "messages", "Missing required parameter: 'messages'."))
		return
	case len(req.Messages) == 0:
		o.sendJSON(http.StatusBadRequest, invalidRequest("empty_array", "messages",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."))
		return
	case req.MaxTokens != nil && reasoningModel(req.Model):
		o.sendJSON(http.StatusBadRequest, invalidRequest("unsupported_parameter", "max_tokens",
			"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."))
		return
	case s.cfg.strictReason && reasoningSent(&req) >= 0:
		i := strconv.Itoa(reasoningSent(&req))
		msg := "'messages." + i + "' : for 'role:assistant' the following must be satisfied[('messages." + i + "' : property 'reasoning_content' is unsupported)]"
		o.sendJSON(http.StatusBadRequest, append(appendString([]byte(`{"error":{"type":"invalid_request_error","message":`), msg), "}}"...))
		return
	case s.cfg.thinking && reasoningMissing(&req):
		o.sendJSON(http.StatusBadRequest, invalidRequest("invalid_request_error", "", MsgReasoningNotPassedBack))
		return
	}

	a := chatAnswer{id: s.newID("chatcmpl-", 29), created: time.Now().Unix(), model: req.Model}
	if s.cfg.thinking || s.cfg.strictReason {
		a.reasoning, a.reasoningKey = ThinkingText, "reasoning_content"
		if s.cfg.strictReason {
			a.reasoningKey = "reasoning"
		}
		a.completionTokens += Tokens(a.reasoning)
	}
	var userText, lastRole, lastText string
	for _, m := range req.Messages {
		t, _ := contentText(m.Content)
		a.promptTokens += Tokens(t)
		if m.Role == "user" {
			userText = t
		}
		lastRole, lastText = m.Role, t
	}
	if lastRole == "tool" {
		// The conversation continues after a tool call: answer with text.
		a.text = EchoPrefix + lastText
	} else {
		tools := chatTools(&req)
		if s.cfg.noToolCalls {
			tools = nil
		}
		if only := s.cfg.onlyTools; only != nil {
			tools = slices.DeleteFunc(tools, func(t toolDef) bool { return !slices.Contains(only, t.name) })
		}
		for _, t := range tools {
			args := toolArguments(t.schema, userText)
			a.calls = append(a.calls, toolCall{id: s.newID("call_", 24), name: t.name, args: args})
			a.completionTokens += Tokens(args)
		}
		if len(a.calls) == 0 {
			a.text = EchoPrefix + userText
		}
	}
	a.completionTokens += Tokens(a.text)

	if req.Stream {
		includeUsage, obfuscate := false, true
		if so := req.StreamOptions; so != nil {
			includeUsage = so.IncludeUsage
			if so.IncludeObfuscation != nil {
				obfuscate = *so.IncludeObfuscation
			}
		}
		s.streamChat(o, &a, includeUsage, obfuscate)
		return
	}
	o.sendJSON(http.StatusOK, a.appendCompletion(make([]byte, 0, 512+len(a.text))))
}

// reasoningSent is the index of the first message carrying a
// reasoning_content member, or -1.
func reasoningSent(req *chatRequest) int {
	for i, m := range req.Messages {
		if m.ReasoningContent != nil {
			return i
		}
	}
	return -1
}

// reasoningMissing reports whether a request with tools has an assistant
// message with tool calls and no reasoning_content member, which DeepSeek's
// thinking mode refuses.
func reasoningMissing(req *chatRequest) bool {
	if len(req.Tools) == 0 {
		return false
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" && string(m.ToolCalls) != "[]" && m.ReasoningContent == nil {
			return true
		}
	}
	return false
}

// chatTools returns the tools the answer calls according to tool_choice
// and parallel_tool_calls: none for "none", the named one for a named
// choice, else every function tool (only the first if parallel_tool_calls
// is false).
func chatTools(req *chatRequest) []toolDef {
	var tools []toolDef
	for _, t := range req.Tools {
		if t.Type == "function" || t.Type == "" {
			tools = append(tools, toolDef{name: t.Function.Name, schema: t.Function.Parameters})
		}
	}
	if len(tools) == 0 {
		return nil
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	if len(choice) > 0 && choice[0] == '"' {
		var c string
		_ = json.Unmarshal(choice, &c)
		if c == "none" {
			return nil
		}
	} else if len(choice) > 0 && choice[0] == '{' {
		var c struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		_ = json.Unmarshal(choice, &c)
		for _, t := range tools {
			if t.name == c.Function.Name {
				return []toolDef{t}
			}
		}
	}
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls {
		return tools[:1]
	}
	return tools
}

// appendUsage appends OpenAI's usage object.
func (a *chatAnswer) appendUsage(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, a.promptTokens)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, a.completionTokens)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, a.promptTokens+a.completionTokens)
	return append(b, `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

// appendCompletion appends the non-streaming chat.completion object.
func (a *chatAnswer) appendCompletion(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, a.id)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = appendInt64(b, a.created)
	b = append(b, `,"model":`...)
	b = appendString(b, a.model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant",`...)
	if a.reasoning != "" {
		b = append(append(append(b, '"'), a.reasoningKey...), `":`...)
		b = appendString(b, a.reasoning)
		b = append(b, ',')
	}
	b = append(b, `"content":`...)
	if len(a.calls) > 0 {
		b = append(b, `null,"refusal":null,"annotations":[],"tool_calls":[`...)
		for i, c := range a.calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.id)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, c.name)
			b = append(b, `,"arguments":`...)
			b = appendString(b, c.args)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	} else {
		b = appendString(b, a.text)
		b = append(b, `,"refusal":null,"annotations":[]`...)
	}
	b = append(b, `},"finish_reason":`...)
	b = appendString(b, a.finishReason())
	b = append(b, `}],"usage":`...)
	b = a.appendUsage(b)
	return append(b, `,"service_tier":"default","system_fingerprint":null}`...)
}

// obfuscationPad provides the "obfuscation" values of stream chunks.
const obfuscationPad = "Xq7LmN2pR9sT4vWz"

// chatStream writes the chunks of a streaming chat completion.
type chatStream struct {
	o            *output
	prefix       []byte // "data: {...,"choices":[" shared by every chunk
	buf          []byte
	usageNull    bool // every chunk has "usage":null (include_usage)
	obfuscate    bool
	usageInChunk []byte // usage object for the finish chunk, if any
}

// emit writes one chunk: prefix, the choices array content (empty for the
// usage chunk) and, if usage is not nil, that usage object.
func (cs *chatStream) emit(class chunkClass, choice string, choiceArgs func([]byte) []byte, usage []byte) bool {
	b := append(cs.buf[:0], cs.prefix...)
	b = append(b, choice...)
	if choiceArgs != nil {
		b = choiceArgs(b)
	}
	b = append(b, ']')
	switch {
	case usage != nil:
		b = append(b, `,"usage":`...)
		b = append(b, usage...)
	case cs.usageNull:
		b = append(b, `,"usage":null`...)
	}
	if cs.obfuscate {
		b = append(b, `,"obfuscation":"`...)
		b = append(b, obfuscationPad[:cs.o.sent%len(obfuscationPad)]...)
		b = append(b, '"')
	}
	b = append(b, "}\n\n"...)
	cs.buf = b
	return cs.o.chunk(class, b)
}

// streamChat writes a, chunk by chunk, as OpenAI streams it.
func (s *Server) streamChat(o *output, a *chatAnswer, includeUsage, obfuscate bool) {
	p := make([]byte, 0, 192)
	p = append(p, `data: {"id":`...)
	p = appendString(p, a.id)
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = appendInt64(p, a.created)
	p = append(p, `,"model":`...)
	p = appendString(p, a.model)
	p = append(p, `,"service_tier":"default","system_fingerprint":null,"choices":[`...)
	cs := &chatStream{o: o, prefix: p, buf: make([]byte, 0, 512), usageNull: includeUsage, obfuscate: obfuscate}
	var usage []byte
	if includeUsage || s.cfg.usageInFinish {
		usage = a.appendUsage(make([]byte, 0, 320))
	}

	o.startStream("text/event-stream; charset=utf-8", true)
	if a.reasoning != "" {
		for i, piece := range splitWords(a.reasoning) {
			head := `{"index":0,"delta":{"` + a.reasoningKey + `":`
			if i == 0 {
				head = `{"index":0,"delta":{"role":"assistant","content":null,"` + a.reasoningKey + `":`
			}
			ok := cs.emit(chunkContent, head, func(b []byte) []byte {
				b = appendString(b, piece)
				return append(b, `},"finish_reason":null}`...)
			}, nil)
			if !ok {
				return
			}
		}
	}
	if len(a.calls) > 0 {
		for i, c := range a.calls {
			head := `{"index":0,"delta":{"tool_calls":[`
			if i == 0 {
				head = `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[`
			}
			ok := cs.emit(chunkContent, head, func(b []byte) []byte {
				b = append(b, `{"index":`...)
				b = appendInt(b, i)
				b = append(b, `,"id":`...)
				b = appendString(b, c.id)
				b = append(b, `,"type":"function","function":{"name":`...)
				b = appendString(b, c.name)
				b = append(b, `,"arguments":""}}]`...)
				if i == 0 {
					b = append(b, `,"refusal":null`...)
				}
				return append(b, `},"finish_reason":null}`...)
			}, nil)
			if !ok {
				return
			}
			for _, frag := range splitFragments(c.args, 8) {
				ok := cs.emit(chunkContent, `{"index":0,"delta":{"tool_calls":[{"index":`, func(b []byte) []byte {
					b = appendInt(b, i)
					b = append(b, `,"function":{"arguments":`...)
					b = appendString(b, frag)
					return append(b, `}}]},"finish_reason":null}`...)
				}, nil)
				if !ok {
					return
				}
			}
		}
	} else {
		if !cs.emit(chunkContent, `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}`, nil, nil) {
			return
		}
		for _, piece := range splitWords(a.text) {
			ok := cs.emit(chunkContent, `{"index":0,"delta":{"content":`, func(b []byte) []byte {
				b = appendString(b, piece)
				return append(b, `},"finish_reason":null}`...)
			}, nil)
			if !ok {
				return
			}
		}
	}
	finish := `{"index":0,"delta":{},"finish_reason":"stop"}`
	if len(a.calls) > 0 {
		finish = `{"index":0,"delta":{},"finish_reason":"tool_calls"}`
	}
	if s.cfg.usageInFinish {
		if !cs.emit(chunkFinish, finish, nil, usage) {
			return
		}
	} else {
		if !cs.emit(chunkFinish, finish, nil, nil) {
			return
		}
		if includeUsage && !cs.emit(chunkFinish, "", nil, usage) {
			return
		}
	}
	if !o.chunk(chunkTerminal, []byte("data: [DONE]\n\n")) {
		return
	}
	o.end()
}

// reasoningModel reports whether OpenAI refuses max_tokens for model, as it
// does for gpt-5 and the o-series.
func reasoningModel(model string) bool {
	for _, p := range []string{"gpt-5", "o1", "o3", "o4"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}
