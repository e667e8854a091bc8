package translate

import (
	"crypto/rand"
	"encoding/json"
	"strings"
	"time"
)

// Chat Completions answers to OpenAI Responses answers, for /v1/responses
// callers whose model lives on an upstream without the Responses API.

// responseUsage is the Responses API's usage object. Cache writes (an
// Anthropic upstream's) are input_tokens_details.cache_write_tokens, as
// Azure's Responses API reports them and Codex reads them; OpenAI's answers
// have no such field, so it is left out when there were none.
func responseUsage(u Usage) map[string]any {
	in := map[string]int64{"cached_tokens": u.CachedTokens}
	if u.CacheCreationTokens > 0 {
		in["cache_write_tokens"] = u.CacheCreationTokens
	}
	return map[string]any{
		"input_tokens":          u.PromptTokens,
		"input_tokens_details":  in,
		"output_tokens":         u.CompletionTokens,
		"output_tokens_details": map[string]int64{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens":          u.TotalTokens,
	}
}

// responseObject is a response with its fixed fields; incomplete, when not
// empty, is why the answer is incomplete (incomplete_details.reason) and
// makes its status "incomplete".
func responseObject(id, model, status, incomplete string, created int64, output []any, usage any, echo Echo) map[string]any {
	r := map[string]any{
		"id": id, "object": "response", "created_at": created, "status": status, "model": model,
		"output": output, "usage": usage, "error": nil, "incomplete_details": nil,
		"instructions": nil, "metadata": map[string]any{}, "parallel_tool_calls": true,
		"tool_choice": "auto", "tools": []any{}, "text": map[string]any{"format": map[string]string{"type": "text"}},
		// Always there in OpenAI's answers (the SDKs' Response requires
		// them): null leaves them to the model, which the gateway
		// cannot know the defaults of.
		"temperature": nil, "top_p": nil,
	}
	for k, v := range echo.fields {
		r[k] = v
	}
	if incomplete != "" {
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]string{"reason": incomplete}
	}
	return r
}

// Echo is what a Responses response repeats of the request it answers:
// its instructions, tools, sampling and storage settings, as the client
// sent them. The zero Echo repeats nothing (the defaults stand).
type Echo struct{ fields map[string]json.RawMessage }

// echoed are the request's fields a response repeats.
var echoed = []string{
	"instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens", "max_tool_calls",
	"temperature", "top_p", "top_logprobs", "store", "previous_response_id", "metadata", "text",
	"reasoning", "truncation", "user", "safety_identifier", "prompt_cache_key",
}

// EchoFrom reads what a response repeats of a /v1/responses request, from
// its body's members (their values are kept, not copied), as the client
// sent them (previous_response_id included); fields it lacks or sends as
// null keep the response's defaults.
func EchoFrom(fields map[string]json.RawMessage) Echo {
	var e Echo
	for _, k := range echoed {
		if v, ok := fields[k]; ok && !isNull(v) {
			if e.fields == nil {
				e.fields = make(map[string]json.RawMessage, 8)
			}
			e.fields[k] = v
		}
	}
	return e
}

// Response translates a chat.completion into a Responses response for
// model, repeating the request (the zero Echo: its defaults).
func (e Echo) Response(body []byte, model string) ([]byte, Usage, error) {
	return openAIToResponsesResponse(body, model, e, nil)
}

// ResponseWithUsage translates as Response does, reporting u, the
// upstream's own usage, where the chat.completion's cannot carry all of it
// (an Anthropic upstream's cache writes).
func (e Echo) ResponseWithUsage(body []byte, model string, u Usage) ([]byte, error) {
	out, _, err := openAIToResponsesResponse(body, model, e, &u)
	return out, err
}

// Chunks returns a ChunkToResponses whose response repeats the request.
func (e Echo) Chunks(model string) *ChunkToResponses {
	return &ChunkToResponses{model: model, tools: map[int]bool{}, tool: -1, echo: e, custom: e.customTools()}
}

// customTools are the names of the request's custom tools, which the
// upstream called as functions (ResponsesToOpenAIRequest); nil when it has
// none.
func (e Echo) customTools() map[string]bool {
	raw, ok := e.fields["tools"]
	if !ok {
		return nil
	}
	var tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &tools)
	var names map[string]bool
	for _, t := range tools {
		if t.Type == "custom" {
			if names == nil {
				names = map[string]bool{}
			}
			names[t.Name] = true
		}
	}
	return names
}

// incompleteReason is the Responses API's incomplete_details.reason of a
// chat finish_reason: the output cap, or the upstream's content filter
// cutting the answer short; "" for an answer that is whole.
func incompleteReason(finish string) string {
	switch finish {
	case "length":
		return "max_output_tokens"
	case "content_filter":
		return "content_filter"
	}
	return ""
}

func itemID(prefix string) string { return prefix + strings.ToLower(rand.Text()) }

// callID is an upstream's tool call id, or one of the gateway's own
// when the upstream sent none (some OpenAI-compatible servers do not): the
// client sends it back with the call's result, so two calls must not share
// an empty one.
func callID(id, prefix string) string {
	if id == "" {
		return itemID(prefix)
	}
	return id
}

// responseID mints the id of a translated response. It is the key of the
// stored answer (GET /v1/responses/{id}, previous_response_id), so it is
// never made of the upstream's completion id, which need not be unique
// (Ollama draws its ids from a thousand).
func responseID() string { return itemID("resp_") }

func reasoningItem(id, text, status string) map[string]any {
	summary := []any{}
	if text != "" {
		summary = append(summary, map[string]string{"type": "summary_text", "text": text})
	}
	item := map[string]any{"id": id, "type": "reasoning", "summary": summary}
	if status != "" {
		item["status"] = status
	}
	return item
}

func messageItem(id, status string, content []any) map[string]any {
	if content == nil {
		content = []any{}
	}
	return map[string]any{"id": id, "type": "message", "status": status, "role": "assistant", "content": content}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// refusalPart is a message's refusal: what OpenAI's chat answers carry in
// message.refusal (content null) when the model declines.
func refusalPart(text string) map[string]any {
	return map[string]any{"type": "refusal", "refusal": text}
}

// contentPart is a message's content part of kind ("output_text" or
// "refusal") holding text.
func contentPart(kind, text string) map[string]any {
	if kind == "refusal" {
		return refusalPart(text)
	}
	return outputText(text)
}

// cut marks the item an incomplete answer ended in as incomplete, as the
// Responses API does (an item without a status keeps none).
func cut(item map[string]any) {
	if _, ok := item["status"]; ok {
		item["status"] = "incomplete"
	}
}

func callItem(id, callID, name, args, status string) map[string]any {
	return map[string]any{"id": id, "type": "function_call", "status": status, "call_id": callID, "name": name, "arguments": args}
}

func customCallItem(id, callID, name, input string) map[string]any {
	return map[string]any{"id": id, "type": "custom_tool_call", "call_id": callID, "name": name, "input": input}
}

// customInput is the input of a custom tool's call from the arguments of
// the function call the upstream made: its one argument, or the arguments
// themselves when they are not that object (the model wrote the input
// bare).
func customInput(args string) string {
	var a struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &a) != nil || a.Input == nil {
		return args
	}
	return *a.Input
}

func openAIToResponsesResponse(body []byte, model string, echo Echo, reported *Usage) ([]byte, Usage, error) {
	var in chatCompletion
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Usage{}, malformed("completion is not valid JSON")
	}
	if len(in.Choices) == 0 {
		return nil, Usage{}, malformed("completion has no choices")
	}
	ch := in.Choices[0]
	output := []any{}
	reasoning := ch.Message.ReasoningContent
	if reasoning == nil {
		reasoning = ch.Message.Reasoning
	}
	if reasoning != nil && *reasoning != "" {
		output = append(output, reasoningItem(itemID("rs_"), *reasoning, ""))
	}
	var content []any
	if ch.Message.Content != nil && *ch.Message.Content != "" {
		content = append(content, outputText(*ch.Message.Content))
	}
	if ch.Message.Refusal != nil && *ch.Message.Refusal != "" {
		content = append(content, refusalPart(*ch.Message.Refusal))
	}
	if len(content) > 0 {
		output = append(output, messageItem(itemID("msg_"), "completed", content))
	}
	custom := echo.customTools()
	for _, tc := range ch.Message.ToolCalls {
		if custom[tc.Function.Name] {
			output = append(output, customCallItem(itemID("ctc_"), callID(tc.ID, "call_"), tc.Function.Name, customInput(tc.Function.Arguments)))
			continue
		}
		output = append(output, callItem(itemID("fc_"), callID(tc.ID, "call_"), tc.Function.Name, tc.Function.Arguments, "completed"))
	}
	reason := incompleteReason(ch.FinishReason)
	if n := len(output); reason != "" && n > 0 {
		cut(output[n-1].(map[string]any))
	}
	u := in.Usage.Usage()
	if reported != nil {
		u = *reported
	}
	out, err := marshal(responseObject(responseID(), model, "completed", reason, time.Now().Unix(), output, responseUsage(u), echo))
	return out, u, err
}

// ChunkToResponses turns chat.completion.chunk payloads into the Responses
// API's typed stream events: response.created and response.in_progress,
// then for each output item (reasoning, message, function call) its added,
// delta and done events, and response.completed (or response.incomplete)
// with the whole response and its usage. Not safe for concurrent use.
type ChunkToResponses struct {
	model    string
	echo     Echo
	id       string
	created  int64
	seq      int64
	started  bool
	finished bool
	stopped  bool
	// incomplete is why the answer is incomplete, "" when it is whole.
	incomplete string
	usage      Usage
	output     []any
	// The open item.
	kind   string // "reasoning", "message", "function_call", "custom_tool_call"
	itemID string
	text   strings.Builder // of the item, or of the message's open part
	part   string          // the message's open part: "output_text", "refusal" or ""
	parts  []any           // the message's closed parts
	callID string
	name   string
	calls  streamCalls
	tools  map[int]bool // by call number
	tool   int          // the number of the open call
	// custom are the request's custom tools (Echo.customTools); a call of
	// one is a custom_tool_call item, its input sent when the call ends
	// (the upstream streams it inside a JSON object).
	custom map[string]bool
	// reasoned: a reasoning item was opened.
	reasoned bool
}

func (t *ChunkToResponses) emit(emit Emit, name string, v map[string]any) error {
	v["type"] = name
	v["sequence_number"] = t.seq
	t.seq++
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return emit(name, b)
}

func (t *ChunkToResponses) response(status, incomplete string, usage any) map[string]any {
	return responseObject(t.id, t.model, status, incomplete, t.created, append([]any{}, t.output...), usage, t.echo)
}

// Chunk handles one chunk's data; an error chunk returns an *AnthropicError.
func (t *ChunkToResponses) Chunk(data []byte, emit Emit) error {
	c, err := parseChunk(data)
	if err != nil {
		return err
	}
	if !t.started {
		t.started = true
		t.id, t.created = responseID(), time.Now().Unix()
		if err := t.emit(emit, "response.created", map[string]any{"response": t.response("in_progress", "", nil)}); err != nil {
			return err
		}
		if err := t.emit(emit, "response.in_progress", map[string]any{"response": t.response("in_progress", "", nil)}); err != nil {
			return err
		}
	}
	if c.Usage != nil {
		t.usage = c.Usage.Usage()
	}
	for _, ch := range c.Choices {
		d := ch.Delta
		if reasoning := d.reasoning(); reasoning != nil {
			text := *reasoning
			if t.kind != "reasoning" && t.reasoned {
				// A chat answer's reasoning goes on a blank line apart
				// after an answer's text or a call (interleaved
				// thinking): here it is an item of its own.
				text = strings.TrimPrefix(text, reasoningBreak)
			}
			if text != "" {
				if err := t.open("reasoning", emit); err != nil {
					return err
				}
				t.reasoned = true
				t.text.WriteString(text)
				if err := t.emit(emit, "response.reasoning_summary_text.delta", map[string]any{"item_id": t.itemID,
					"output_index": len(t.output), "summary_index": 0, "delta": text}); err != nil {
					return err
				}
			}
		}
		if d.Content != nil && *d.Content != "" {
			if err := t.openPart("output_text", emit); err != nil {
				return err
			}
			t.text.WriteString(*d.Content)
			if err := t.emit(emit, "response.output_text.delta", map[string]any{"item_id": t.itemID,
				"output_index": len(t.output), "content_index": len(t.parts), "delta": *d.Content, "logprobs": []any{}}); err != nil {
				return err
			}
		}
		if d.Refusal != nil && *d.Refusal != "" {
			if err := t.openPart("refusal", emit); err != nil {
				return err
			}
			t.text.WriteString(*d.Refusal)
			if err := t.emit(emit, "response.refusal.delta", map[string]any{"item_id": t.itemID,
				"output_index": len(t.output), "content_index": len(t.parts), "delta": *d.Refusal}); err != nil {
				return err
			}
		}
		for i := range d.ToolCalls {
			tc := &d.ToolCalls[i]
			call := t.calls.call(tc)
			if !t.tools[call] {
				if len(t.tools) >= maxStreamBlocks {
					return malformed("too many tool calls")
				}
				t.tools[call] = true
				if err := t.close(emit); err != nil {
					return err
				}
				t.tool, t.callID, t.name = call, callID(tc.ID, "call_"), tc.Function.Name
				kind := "function_call"
				if t.custom[t.name] {
					kind = "custom_tool_call"
				}
				if err := t.open(kind, emit); err != nil {
					return err
				}
			}
			if tc.Function.Arguments != "" {
				if call != t.tool || t.kind != "function_call" && t.kind != "custom_tool_call" {
					return malformed("interleaved tool call arguments")
				}
				t.text.WriteString(tc.Function.Arguments)
				if t.kind == "custom_tool_call" {
					continue
				}
				if err := t.emit(emit, "response.function_call_arguments.delta", map[string]any{"item_id": t.itemID,
					"output_index": len(t.output), "delta": tc.Function.Arguments}); err != nil {
					return err
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finished = true
			t.incomplete = incompleteReason(*ch.FinishReason)
		}
	}
	return nil
}

// open starts an item of kind unless one is open (a call always starts its
// own).
func (t *ChunkToResponses) open(kind string, emit Emit) error {
	call := kind == "function_call" || kind == "custom_tool_call"
	if t.kind == kind && !call {
		return nil
	}
	if !call || t.kind != "" {
		if err := t.close(emit); err != nil {
			return err
		}
	}
	t.kind = kind
	t.text.Reset()
	idx := len(t.output)
	var item map[string]any
	switch kind {
	case "reasoning":
		t.itemID = itemID("rs_")
		item = reasoningItem(t.itemID, "", "")
	case "message":
		t.itemID = itemID("msg_")
		t.part, t.parts = "", nil
		item = messageItem(t.itemID, "in_progress", nil)
	case "custom_tool_call":
		t.itemID = itemID("ctc_")
		item = customCallItem(t.itemID, t.callID, t.name, "")
	default:
		t.itemID = itemID("fc_")
		item = callItem(t.itemID, t.callID, t.name, "", "in_progress")
	}
	if err := t.emit(emit, "response.output_item.added", map[string]any{"output_index": idx, "item": item}); err != nil {
		return err
	}
	if kind == "reasoning" {
		return t.emit(emit, "response.reasoning_summary_part.added", map[string]any{"item_id": t.itemID, "output_index": idx,
			"summary_index": 0, "part": map[string]string{"type": "summary_text", "text": ""}})
	}
	return nil
}

// openPart starts a content part of kind ("output_text" or "refusal") in
// the open message, opening the message first, unless that part is open.
func (t *ChunkToResponses) openPart(kind string, emit Emit) error {
	if err := t.open("message", emit); err != nil {
		return err
	}
	if t.part == kind {
		return nil
	}
	if err := t.closePart(emit); err != nil {
		return err
	}
	t.part = kind
	t.text.Reset()
	return t.emit(emit, "response.content_part.added", map[string]any{"item_id": t.itemID, "output_index": len(t.output),
		"content_index": len(t.parts), "part": contentPart(kind, "")})
}

// closePart ends the open message's open part with its done events.
func (t *ChunkToResponses) closePart(emit Emit) error {
	if t.part == "" {
		return nil
	}
	idx, i, text := len(t.output), len(t.parts), t.text.String()
	var err error
	if t.part == "refusal" {
		err = t.emit(emit, "response.refusal.done", map[string]any{"item_id": t.itemID, "output_index": idx, "content_index": i, "refusal": text})
	} else {
		err = t.emit(emit, "response.output_text.done", map[string]any{"item_id": t.itemID, "output_index": idx, "content_index": i, "text": text, "logprobs": []any{}})
	}
	if err != nil {
		return err
	}
	part := contentPart(t.part, text)
	t.part, t.parts = "", append(t.parts, part)
	return t.emit(emit, "response.content_part.done", map[string]any{"item_id": t.itemID, "output_index": idx, "content_index": i, "part": part})
}

// close ends the open item with its done events.
func (t *ChunkToResponses) close(emit Emit) error {
	if t.kind == "" {
		return nil
	}
	idx, text := len(t.output), t.text.String()
	var item map[string]any
	var err error
	switch t.kind {
	case "reasoning":
		item = reasoningItem(t.itemID, text, "")
		if err = t.emit(emit, "response.reasoning_summary_text.done", map[string]any{"item_id": t.itemID, "output_index": idx, "summary_index": 0, "text": text}); err == nil {
			err = t.emit(emit, "response.reasoning_summary_part.done", map[string]any{"item_id": t.itemID, "output_index": idx,
				"summary_index": 0, "part": map[string]string{"type": "summary_text", "text": text}})
		}
	case "message":
		if err = t.closePart(emit); err == nil {
			item = messageItem(t.itemID, "completed", t.parts)
		}
	case "custom_tool_call":
		input := customInput(text)
		item = customCallItem(t.itemID, t.callID, t.name, input)
		if input != "" {
			err = t.emit(emit, "response.custom_tool_call_input.delta", map[string]any{"item_id": t.itemID, "output_index": idx, "delta": input})
		}
		if err == nil {
			err = t.emit(emit, "response.custom_tool_call_input.done", map[string]any{"item_id": t.itemID, "output_index": idx, "input": input})
		}
	default:
		if text == "" {
			text = "{}"
		}
		item = callItem(t.itemID, t.callID, t.name, text, "completed")
		err = t.emit(emit, "response.function_call_arguments.done", map[string]any{"item_id": t.itemID, "output_index": idx, "arguments": text})
	}
	if err != nil {
		return err
	}
	if t.stopped && t.incomplete != "" {
		cut(item) // the answer ended in it
	}
	t.kind = ""
	t.output = append(t.output, item)
	return t.emit(emit, "response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// Done takes the upstream's [DONE]: the answer is whole even when no chunk
// named its finish reason (some compatible servers name none), and
// completes as a "stop" would have completed it.
func (t *ChunkToResponses) Done() { t.finished = true }

// Finish ends the response once the upstream's stream ended and reports
// whether it was complete; an incomplete one sends nothing more (the
// caller ends the stream with response.failed).
func (t *ChunkToResponses) Finish(emit Emit) (bool, error) {
	if !t.finished || !t.started {
		return false, nil
	}
	if t.stopped {
		return true, nil
	}
	t.stopped = true
	if err := t.close(emit); err != nil {
		return true, err
	}
	name := "response.completed"
	if t.incomplete != "" {
		name = "response.incomplete"
	}
	return true, t.emit(emit, name, map[string]any{"response": t.response("completed", t.incomplete, responseUsage(t.usage))})
}

// Usage is the accounting the upstream reported.
func (t *ChunkToResponses) Usage() Usage { return t.usage }

// ReportUsage makes the end of the response report u, the upstream's own
// usage, where the chunks' cannot carry all of it (an Anthropic upstream's
// cache writes).
func (t *ChunkToResponses) ReportUsage(u Usage) { t.usage = u }

// ID is the response id once the first chunk was seen.
func (t *ChunkToResponses) ID() string { return t.id }
