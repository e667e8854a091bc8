package translate

import (
	"encoding/json"
	"time"
)

func nowUnix() int64 { return time.Now().Unix() }

// ResponsesToChunks turns a Responses event stream into
// chat.completion.chunk payloads: text and reasoning deltas, one tool call
// per function_call item, and at response.completed the finish chunk and
// (when asked for) the usage chunk. Not safe for concurrent use.
type ResponsesToChunks struct {
	model        string
	includeUsage bool
	id           string
	created      int64
	started      bool
	done         bool
	calls        map[string]int // function_call item id to tool call index
	usage        Usage
	// reasoning is the part of the reasoning last sent ("": none yet):
	// the next part's text follows it after a blank line.
	reasoning string
}

// NewResponsesToChunks returns a translator naming model in its chunks.
func NewResponsesToChunks(model string, includeUsage bool) *ResponsesToChunks {
	return &ResponsesToChunks{model: model, includeUsage: includeUsage, calls: map[string]int{}}
}

type respEvent struct {
	Type   string `json:"type"`
	Delta  string `json:"delta"`
	ItemID string `json:"item_id"`
	// SummaryIndex and ContentIndex tell a reasoning item's parts apart,
	// as written (they are compared, not read).
	SummaryIndex json.RawMessage `json:"summary_index"`
	ContentIndex json.RawMessage `json:"content_index"`
	Response     json.RawMessage `json:"response"`
	Item         *struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	} `json:"item"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

func (t *ResponsesToChunks) chunk(emit func([]byte) error, choice map[string]any, usage *Usage) error {
	c := map[string]any{"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model}
	if choice != nil {
		c["choices"] = []any{choice}
	} else {
		c["choices"] = []any{}
	}
	if usage != nil {
		c["usage"] = json.RawMessage(appendUsage(nil, *usage))
	}
	b, err := marshal(c)
	if err != nil {
		return err
	}
	return emit(b)
}

func delta(d map[string]any) map[string]any {
	return map[string]any{"index": 0, "delta": d, "finish_reason": nil}
}

// start sends the first chunk, the assistant's role, once; resp is the
// event's response object, whose id the chunks' id is made of.
func (t *ResponsesToChunks) start(resp json.RawMessage, emit func([]byte) error) error {
	if t.started {
		return nil
	}
	t.started = true
	t.id, t.created = completionID(""), nowUnix()
	var r struct {
		ID string `json:"id"`
	}
	if len(resp) > 0 && json.Unmarshal(resp, &r) == nil && r.ID != "" {
		t.id = chatID(r.ID)
	}
	return t.chunk(emit, delta(map[string]any{"role": "assistant", "content": ""}), nil)
}

// Text sends text as the answer's next content delta, as a
// response.output_text.delta event carrying it does: for a caller that
// holds back or cuts the text of those events (at a stop sequence, which
// the Responses API does not have).
func (t *ResponsesToChunks) Text(text string, emit func([]byte) error) error {
	if err := t.start(nil, emit); err != nil {
		return err
	}
	return t.chunk(emit, delta(map[string]any{"content": text}), nil)
}

// Stop ends the answer before the upstream did, where the caller found one
// of the request's stop sequences in its text: the finish chunk says "stop"
// ("tool_calls" after tool calls, as at response.completed), naming seq in
// its stop_reason as vLLM's does when seq is not "" (ChunkToMessages reads
// it), and the usage chunk, when asked for, carries u, since the upstream
// reported none. Done reports true after it.
func (t *ResponsesToChunks) Stop(seq string, u Usage, emit func([]byte) error) error {
	if err := t.start(nil, emit); err != nil {
		return err
	}
	t.usage = u
	t.done = true
	finish := "stop"
	if len(t.calls) > 0 {
		finish = "tool_calls"
	}
	choice := map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}
	if seq != "" {
		choice["stop_reason"] = seq
	}
	if err := t.chunk(emit, choice, nil); err != nil {
		return err
	}
	if t.includeUsage {
		return t.chunk(emit, nil, &t.usage)
	}
	return nil
}

// Event handles one event (name may be empty: the data's type names it).
// A failure event returns an *AnthropicError with the upstream's message.
func (t *ResponsesToChunks) Event(name string, data []byte, emit func([]byte) error) error {
	var ev respEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return malformed("event is not valid JSON")
	}
	if name == "" {
		name = ev.Type
	}
	if name != "error" && name != "response.failed" {
		if err := t.start(ev.Response, emit); err != nil {
			return err
		}
	}
	switch name {
	case "error":
		return &AnthropicError{Type: "api_error", Message: ev.Message, Code: ev.Code}
	case "response.failed":
		var r struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(ev.Response, &r)
		e := &AnthropicError{Type: "api_error", Message: "the upstream response failed"}
		if r.Error != nil {
			e.Message, e.Code = r.Error.Message, r.Error.Code
		}
		return e
	case "response.output_text.delta":
		return t.chunk(emit, delta(map[string]any{"content": ev.Delta}), nil)
	case "response.refusal.delta":
		return t.chunk(emit, delta(map[string]any{"refusal": ev.Delta}), nil)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		// The parts of a summary (each a paragraph, often under its own
		// title) and the reasoning items come without a separator: a
		// blank line keeps them apart, as ResponsesToOpenAIResponse does.
		text := ev.Delta
		if part := name + "\x00" + ev.ItemID + "\x00" + string(ev.SummaryIndex) + "\x00" + string(ev.ContentIndex); text != "" && part != t.reasoning {
			if t.reasoning != "" {
				text = reasoningBreak + text
			}
			t.reasoning = part
		}
		return t.chunk(emit, delta(map[string]any{"reasoning_content": text}), nil)
	case "response.output_item.added":
		if ev.Item == nil || ev.Item.Type != "function_call" {
			return nil
		}
		if len(t.calls) >= maxStreamBlocks {
			return malformed("too many tool calls")
		}
		i := len(t.calls)
		t.calls[ev.Item.ID] = i
		return t.chunk(emit, delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": ev.Item.CallID, "type": "function",
			"function": map[string]string{"name": ev.Item.Name, "arguments": ""}}}}), nil)
	case "response.function_call_arguments.delta":
		i, ok := t.calls[ev.ItemID]
		if !ok {
			return malformed("arguments of an unknown function call")
		}
		return t.chunk(emit, delta(map[string]any{"tool_calls": []any{map[string]any{"index": i,
			"function": map[string]string{"arguments": ev.Delta}}}}), nil)
	case "response.completed", "response.incomplete":
		var r respOutput
		if err := json.Unmarshal(ev.Response, &r); err != nil {
			return malformed("final response is not valid JSON")
		}
		t.usage = r.usage()
		finish := "stop"
		if len(t.calls) > 0 {
			finish = "tool_calls"
		}
		if name == "response.incomplete" {
			finish = r.incompleteFinish()
		}
		t.done = true
		if err := t.chunk(emit, map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}, nil); err != nil {
			return err
		}
		if t.includeUsage {
			return t.chunk(emit, nil, &t.usage)
		}
	}
	return nil
}

// Done reports whether the response completed.
func (t *ResponsesToChunks) Done() bool { return t.done }

// Usage is the accounting of the final response.
func (t *ResponsesToChunks) Usage() Usage { return t.usage }
