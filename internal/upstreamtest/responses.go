package upstreamtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// PathResponses is OpenAI's Responses API route.
const PathResponses = "/v1/responses"

// responsesRequest holds the fields of a Responses request the fake uses.
type responsesRequest struct {
	Model        string          `json:"model"`
	Input        json.RawMessage `json:"input"`
	Instructions string          `json:"instructions"`
	Stream       bool            `json:"stream"`
	ToolChoice   json.RawMessage `json:"tool_choice"`
	Tools        []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
}

// responsesAnswer is what the fake answers to a Responses request.
type responsesAnswer struct {
	id, msgID, model string
	created          int64
	text             string
	calls            []toolCall
	input, output    int
	// echo is what the response repeats of the request, as OpenAI's does.
	echo map[string]json.RawMessage
}

// responsesEchoed are the request members a response repeats.
var responsesEchoed = []string{"instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
	"temperature", "top_p", "store", "previous_response_id", "metadata", "text", "reasoning", "truncation", "user"}

// echoOf reads the members a response repeats of its request body.
func echoOf(body []byte) map[string]json.RawMessage {
	var all map[string]json.RawMessage
	if json.Unmarshal(body, &all) != nil {
		return nil
	}
	echo := map[string]json.RawMessage{}
	for _, k := range responsesEchoed {
		if v, ok := all[k]; ok && string(v) != "null" {
			echo[k] = v
		}
	}
	return echo
}

// serveResponses answers POST /v1/responses the way OpenAI does: the echo
// of the last user text (or of the last function call output), or a
// function call per function tool.
func (s *Server) serveResponses(o *output, body []byte) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		o.sendJSON(http.StatusBadRequest, invalidRequest("", "", msgOpenAIBadJSON))
		return
	}
	if req.Model == "" {
		o.sendJSON(http.StatusBadRequest, invalidRequest("missing_required_parameter", "model", msgOpenAINoModel))
		return
	}
	if s.cfg.streamOnly {
		if detail := chatGPTRefusal(body, req.Stream); detail != "" {
			o.sendJSON(http.StatusBadRequest, []byte(`{"detail":`+strconv.Quote(detail)+`}`))
			return
		}
	}
	var userText string
	afterTool := false
	var s1 string
	if json.Unmarshal(req.Input, &s1) == nil {
		userText = s1
	} else {
		var items []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		}
		if json.Unmarshal(req.Input, &items) != nil || len(items) == 0 {
			o.sendJSON(http.StatusBadRequest, invalidRequest("invalid_type", "input", "Invalid type for 'input': expected a string or an array of items."))
			return
		}
		for _, it := range items {
			switch {
			case it.Type == "function_call_output":
				userText, _ = contentText(it.Output)
				afterTool = true
			case it.Role == "user":
				userText, _ = contentText(it.Content)
				afterTool = false
			}
		}
	}
	a := responsesAnswer{id: s.newID("resp_", 24), msgID: s.newID("msg_", 24), model: req.Model, created: time.Now().Unix(), echo: echoOf(body)}
	a.input = Tokens(req.Instructions) + Tokens(userText)
	if !afterTool && !s.cfg.noToolCalls && string(req.ToolChoice) != `"none"` {
		for _, t := range req.Tools {
			if t.Type == "function" {
				a.calls = append(a.calls, toolCall{id: s.newID("call_", 24), name: t.Name, args: toolArguments(t.Parameters, userText)})
			}
		}
	}
	if len(a.calls) == 0 {
		a.text = EchoPrefix + userText
	}
	a.output = Tokens(a.text)
	for _, c := range a.calls {
		a.output += Tokens(c.args)
	}
	if req.Stream {
		s.streamResponse(o, &a)
		return
	}
	b, _ := json.Marshal(a.response("completed"))
	o.sendJSON(http.StatusOK, b)
}

func (a *responsesAnswer) items(done bool) []any {
	status := "completed"
	if !done {
		status = "in_progress"
	}
	var out []any
	if len(a.calls) == 0 {
		content := []any{}
		if done {
			content = append(content, map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}})
		}
		out = append(out, map[string]any{"id": a.msgID, "type": "message", "status": status, "role": "assistant", "content": content})
	}
	for _, c := range a.calls {
		args := c.args
		if !done {
			args = ""
		}
		out = append(out, map[string]any{"id": "fc_" + c.id, "type": "function_call", "status": status, "call_id": c.id, "name": c.name, "arguments": args})
	}
	return out
}

func (a *responsesAnswer) response(status string) map[string]any {
	r := map[string]any{"id": a.id, "object": "response", "created_at": a.created, "status": status, "model": a.model,
		"output": []any{}, "usage": nil, "error": nil, "incomplete_details": nil, "parallel_tool_calls": true,
		"tool_choice": "auto", "tools": []any{}}
	for k, v := range a.echo {
		r[k] = v
	}
	if status == "completed" {
		r["output"] = a.items(true)
		r["usage"] = map[string]any{"input_tokens": a.input, "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens": a.output, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": a.input + a.output}
	}
	return r
}

// streamResponse writes a's typed events as OpenAI streams them.
func (s *Server) streamResponse(o *output, a *responsesAnswer) {
	seq := 0
	send := func(class chunkClass, name string, v map[string]any) bool {
		v["type"] = name
		v["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(v)
		return o.chunk(class, []byte("event: "+name+"\ndata: "+string(b)+"\n\n"))
	}
	o.startStream("text/event-stream; charset=utf-8", true)
	if !send(chunkContent, "response.created", map[string]any{"response": a.response("in_progress")}) ||
		!send(chunkContent, "response.in_progress", map[string]any{"response": a.response("in_progress")}) {
		return
	}
	done := a.items(true)
	for i, item := range a.items(false) {
		if !send(chunkContent, "response.output_item.added", map[string]any{"output_index": i, "item": item}) {
			return
		}
		it := item.(map[string]any)
		id := it["id"]
		if it["type"] == "message" {
			if !send(chunkContent, "response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}) {
				return
			}
			for _, w := range splitWords(a.text) {
				if !send(chunkContent, "response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": w, "logprobs": []any{}}) {
					return
				}
			}
			if !send(chunkContent, "response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": a.text, "logprobs": []any{}}) ||
				!send(chunkContent, "response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
					"part": map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}}) {
				return
			}
		} else {
			args := done[i].(map[string]any)["arguments"].(string)
			for _, f := range splitFragments(args, 8) {
				if !send(chunkContent, "response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": f}) {
					return
				}
			}
			if !send(chunkContent, "response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": args}) {
				return
			}
		}
		if !send(chunkContent, "response.output_item.done", map[string]any{"output_index": i, "item": done[i]}) {
			return
		}
	}
	if !send(chunkFinish, "response.completed", map[string]any{"response": a.response("completed")}) {
		return
	}
	o.end()
}

// chatGPTRefusal is the detail of the 400 the ChatGPT backend of codex
// connections answers a request with, or "" when it takes it: it streams
// only, stores nothing, and refuses output caps and sampling.
func chatGPTRefusal(body []byte, stream bool) string {
	var members map[string]json.RawMessage
	_ = json.Unmarshal(body, &members)
	for _, name := range []string{"max_output_tokens", "temperature", "top_p"} {
		if _, ok := members[name]; ok {
			return "Unsupported parameter: " + name
		}
	}
	if string(members["store"]) != "false" {
		return "Store must be set to false"
	}
	if !stream {
		return "Stream must be set to true"
	}
	return ""
}
