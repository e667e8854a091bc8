package upstreamtest

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// messagesRequest holds the fields of an Anthropic Messages request the
// fake uses.
type messagesRequest struct {
	Model     string `json:"model"`
	MaxTokens *int   `json:"max_tokens"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	System json.RawMessage `json:"system"`
	Stream bool            `json:"stream"`
	Tools  []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
}

// messageAnswer is what the fake answers to a Messages request.
type messageAnswer struct {
	id           string
	model        string
	text         string
	calls        []toolCall
	inputTokens  int
	outputTokens int
	// cacheWrite and cacheRead are the prompt cache tokens reported
	// (WithPromptCache).
	cacheWrite, cacheRead int
}

func (a *messageAnswer) stopReason() string {
	if len(a.calls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func anthropicInvalid(o *output, msg string) {
	o.sendJSON(http.StatusBadRequest, anthropicErrorBody("invalid_request_error", msg))
}

// serveMessages answers POST /v1/messages.
func (s *Server) serveMessages(o *output, r *http.Request, body []byte) {
	if r.Header.Get("Anthropic-Version") == "" {
		anthropicInvalid(o, msgAnthropicNoVersion)
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		anthropicInvalid(o, "There was an error parsing the body of your request: "+err.Error())
		return
	}
	switch {
	case req.Model == "":
		anthropicInvalid(o, "model: Field required")
		return
	case req.MaxTokens == nil:
		anthropicInvalid(o, "max_tokens: Field required")
		return
	case req.Messages == nil:
		anthropicInvalid(o, "messages: Field required")
		return
	case len(req.Messages) == 0:
		anthropicInvalid(o, "messages: at least one message is required")
		return
	}
	if msg := badToolID(&req); msg != "" {
		anthropicInvalid(o, msg)
		return
	}

	a := messageAnswer{id: s.newID("msg_01", 22), model: req.Model, cacheWrite: s.cfg.cacheWrite, cacheRead: s.cfg.cacheRead}
	sys, _ := contentText(req.System)
	a.inputTokens = Tokens(sys)
	var userText string
	toolResult := false
	for _, m := range req.Messages {
		t, isResult := contentText(m.Content)
		a.inputTokens += Tokens(t)
		if m.Role == "user" {
			userText, toolResult = t, isResult
		}
	}
	a.text = EchoPrefix + userText
	if !toolResult && !s.cfg.noToolCalls {
		for _, t := range messageTools(&req) {
			a.calls = append(a.calls, toolCall{id: s.newID("toolu_01", 22), name: t.name, args: toolArguments(t.schema, userText)})
		}
	}
	a.outputTokens = Tokens(a.text)
	for _, c := range a.calls {
		a.outputTokens += Tokens(c.args)
	}

	if req.Stream {
		s.streamMessage(o, &a)
		return
	}
	o.sendJSON(http.StatusOK, a.appendMessage(make([]byte, 0, 512+len(a.text))))
}

// badToolID is Anthropic's refusal of the first tool_use id, or tool
// result's tool_use_id, that is not made of [a-zA-Z0-9_-] ("" when all
// are).
func badToolID(req *messagesRequest) string {
	for i, m := range req.Messages {
		var blocks []struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			ToolUseID string `json:"tool_use_id"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for j, b := range blocks {
			field, id := "", ""
			switch b.Type {
			case "tool_use":
				field, id = "tool_use.id", b.ID
			case "tool_result":
				field, id = "tool_result.tool_use_id", b.ToolUseID
			default:
				continue
			}
			if !toolIDPattern(id) {
				return "messages." + strconv.Itoa(i) + ".content." + strconv.Itoa(j) + "." + field +
					": String should match pattern '^[a-zA-Z0-9_-]+$'"
			}
		}
	}
	return ""
}

func toolIDPattern(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// messageTools returns the tools the answer uses according to tool_choice:
// none for "none", the named one for "tool", else every tool (only the
// first with disable_parallel_tool_use).
func messageTools(req *messagesRequest) []toolDef {
	var tools []toolDef
	for _, t := range req.Tools {
		if t.Name != "" {
			tools = append(tools, toolDef{name: t.Name, schema: t.InputSchema})
		}
	}
	if len(tools) == 0 {
		return nil
	}
	if c := req.ToolChoice; c != nil {
		switch c.Type {
		case "none":
			return nil
		case "tool":
			for _, t := range tools {
				if t.name == c.Name {
					return []toolDef{t}
				}
			}
		}
		if c.DisableParallelToolUse {
			return tools[:1]
		}
	}
	return tools
}

// appendAnthropicUsage appends the usage object of a message.
func appendAnthropicUsage(b []byte, a *messageAnswer, output int) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, a.inputTokens)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = appendInt(b, a.cacheWrite)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = appendInt(b, a.cacheRead)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = appendInt(b, a.cacheWrite)
	b = append(b, `,"ephemeral_1h_input_tokens":0},"output_tokens":`...)
	b = appendInt(b, output)
	return append(b, `,"service_tier":"standard"}`...)
}

// appendMessageHead appends the message object up to its content array.
func (a *messageAnswer) appendMessageHead(b []byte) []byte {
	b = append(b, `{"model":`...)
	b = appendString(b, a.model)
	b = append(b, `,"id":`...)
	b = appendString(b, a.id)
	return append(b, `,"type":"message","role":"assistant","content":[`...)
}

// appendMessage appends the non-streaming message object.
func (a *messageAnswer) appendMessage(b []byte) []byte {
	b = a.appendMessageHead(b)
	b = append(b, `{"type":"text","text":`...)
	b = appendString(b, a.text)
	b = append(b, '}')
	for _, c := range a.calls {
		b = append(b, `,{"type":"tool_use","id":`...)
		b = appendString(b, c.id)
		b = append(b, `,"name":`...)
		b = appendString(b, c.name)
		b = append(b, `,"input":`...)
		b = append(b, c.args...)
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	b = appendString(b, a.stopReason())
	b = append(b, `,"stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, a, a.outputTokens)
	return append(b, '}')
}

// messageStream writes the events of a streaming message.
type messageStream struct {
	o   *output
	buf []byte
}

// emit writes "event: name" and a data line holding the JSON object that
// fill appends, without its final brace. Like Anthropic, it pads the object
// with pad spaces before the closing brace.
func (ms *messageStream) emit(class chunkClass, name string, pad int, fill func([]byte) []byte) bool {
	b := append(ms.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = fill(b)
	b = append(b, "            "[:pad]...)
	b = append(b, "}\n\n"...)
	ms.buf = b
	return ms.o.chunk(class, b)
}

// streamMessage writes a as Anthropic streams it: message_start,
// content_block_start, ping, content_block_delta..., content_block_stop
// (per block), message_delta, message_stop.
func (s *Server) streamMessage(o *output, a *messageAnswer) {
	ms := &messageStream{o: o, buf: make([]byte, 0, 512)}
	o.startStream("text/event-stream; charset=utf-8", true)

	ok := ms.emit(chunkContent, "message_start", 4, func(b []byte) []byte {
		b = append(b, `{"type":"message_start","message":`...)
		b = a.appendMessageHead(b)
		b = append(b, `],"stop_reason":null,"stop_sequence":null,"usage":`...)
		b = appendAnthropicUsage(b, a, 1)
		return append(b, '}')
	})
	ok = ok && ms.emit(chunkContent, "content_block_start", 3, func(b []byte) []byte {
		return append(b, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}`...)
	})
	ok = ok && o.chunk(chunkContent, []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"))
	for _, piece := range splitWords(a.text) {
		ok = ok && ms.emit(chunkContent, "content_block_delta", 8, func(b []byte) []byte {
			b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
			b = appendString(b, piece)
			return append(b, '}')
		})
	}
	blockStop := func(index int, class chunkClass) bool {
		return ms.emit(class, "content_block_stop", 4, func(b []byte) []byte {
			b = append(b, `{"type":"content_block_stop","index":`...)
			return appendInt(b, index)
		})
	}
	lastClass := func(i int) chunkClass {
		if i == len(a.calls) {
			return chunkFinish
		}
		return chunkContent
	}
	ok = ok && blockStop(0, lastClass(0))
	for i, c := range a.calls {
		index := i + 1
		ok = ok && ms.emit(chunkContent, "content_block_start", 3, func(b []byte) []byte {
			b = append(b, `{"type":"content_block_start","index":`...)
			b = appendInt(b, index)
			b = append(b, `,"content_block":{"type":"tool_use","id":`...)
			b = appendString(b, c.id)
			b = append(b, `,"name":`...)
			b = appendString(b, c.name)
			return append(b, `,"input":{}}`...)
		})
		for _, frag := range append([]string{""}, splitFragments(c.args, 8)...) {
			ok = ok && ms.emit(chunkContent, "content_block_delta", 8, func(b []byte) []byte {
				b = append(b, `{"type":"content_block_delta","index":`...)
				b = appendInt(b, index)
				b = append(b, `,"delta":{"type":"input_json_delta","partial_json":`...)
				b = appendString(b, frag)
				return append(b, '}')
			})
		}
		ok = ok && blockStop(index, lastClass(index))
	}
	ok = ok && ms.emit(chunkFinish, "message_delta", 12, func(b []byte) []byte {
		b = append(b, `{"type":"message_delta","delta":{"stop_reason":`...)
		b = appendString(b, a.stopReason())
		b = append(b, `,"stop_sequence":null},"usage":{"input_tokens":`...)
		b = appendInt(b, a.inputTokens)
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = appendInt(b, a.cacheWrite)
		b = append(b, `,"cache_read_input_tokens":`...)
		b = appendInt(b, a.cacheRead)
		b = append(b, `,"output_tokens":`...)
		b = appendInt(b, a.outputTokens)
		return append(b, '}')
	})
	ok = ok && ms.emit(chunkTerminal, "message_stop", 7, func(b []byte) []byte {
		return append(b, `{"type":"message_stop"`...)
	})
	if ok {
		o.end()
	}
}

// PathCountTokens is Anthropic's token counting route.
const PathCountTokens = "/v1/messages/count_tokens"

// serveCountTokens answers POST /v1/messages/count_tokens with the input
// tokens the fake would bill for the request.
func (s *Server) serveCountTokens(o *output, r *http.Request, body []byte) {
	if r.Header.Get("Anthropic-Version") == "" {
		anthropicInvalid(o, msgAnthropicNoVersion)
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" || len(req.Messages) == 0 {
		anthropicInvalid(o, "model and messages are required")
		return
	}
	if req.MaxTokens != nil {
		anthropicInvalid(o, "max_tokens: Extra inputs are not permitted")
		return
	}
	if msg := badToolID(&req); msg != "" {
		// The same schema as a request's.
		anthropicInvalid(o, msg)
		return
	}
	sys, _ := contentText(req.System)
	n := Tokens(sys)
	for _, m := range req.Messages {
		t, _ := contentText(m.Content)
		n += Tokens(t)
	}
	b, _ := json.Marshal(map[string]int{"input_tokens": n})
	o.sendJSON(http.StatusOK, b)
}
