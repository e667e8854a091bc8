package translate

import (
	"bytes"
	"encoding/json"
)

// ChunkToMessages turns a stream of chat.completion.chunk payloads into
// Anthropic Messages stream events (message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop).
// Reasoning deltas become a thinking block, content a text block, each tool
// call a tool_use block whose arguments arrive as input_json_delta. Feed it
// every chunk, then call Finish once the upstream ended; not safe for
// concurrent use.
type ChunkToMessages struct {
	model    string
	started  bool
	finished bool   // a finish_reason was seen
	stopped  bool   // message_stop sent
	finish   string // the upstream's finish_reason
	stops    []string
	stopSeq  string // the stop sequence the upstream named (stopSequence)
	index    int    // index of the open block, -1 when none
	kind     string // "text", "thinking", "tool_use" of the open block
	calls    streamCalls
	tools    map[int]int // block index by call number
	blocks   int
	usage    Usage
	input    int64 // the input tokens message_start reports (WithInputTokens)
}

// NewChunkToMessages returns a translator naming model in message_start;
// stops are the request's stop sequences (see stopSequence).
func NewChunkToMessages(model string, stops ...string) *ChunkToMessages {
	return &ChunkToMessages{model: model, index: -1, tools: map[int]int{}, stops: stops}
}

// WithInputTokens sets the input tokens message_start reports, an estimate:
// Anthropic tells the input there, before any content, and clients read it
// there, where an upstream of another shape tells its count only at the
// end, which message_delta carries. Without it message_start reports 0.
func (t *ChunkToMessages) WithInputTokens(n int64) *ChunkToMessages {
	t.input = nonNegative(n)
	return t
}

// Emit receives one event: its name and its JSON data.
type Emit func(name string, data []byte) error

type chatChunk struct {
	ID      string          `json:"id"`
	Choices []chunkChoice   `json:"choices"`
	Usage   *ChatUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Delta        chunkDelta      `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
	MatchedStop  json.RawMessage `json:"matched_stop"`
}

type chunkDelta struct {
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        []chatToolCallS `json:"tool_calls"`
}

// reasoning is the delta's reasoning text, under either name upstreams use
// (reasoning_content first); nil when there is none.
func (d *chunkDelta) reasoning() *string {
	if d.ReasoningContent != nil {
		return d.ReasoningContent
	}
	return d.Reasoning
}

// parseChunk reads one chunk's data; an error chunk returns an
// *AnthropicError.
func parseChunk(data []byte) (chatChunk, error) {
	var c chatChunk
	if !json.Valid(data) {
		return c, malformed("chunk is not valid JSON")
	}
	if !c.read(data) {
		c = chatChunk{}
		if err := json.Unmarshal(data, &c); err != nil {
			return c, malformed("chunk is not valid JSON")
		}
	}
	if len(c.Error) > 0 && !isNull(c.Error) {
		return c, parseAnthropicError(data)
	}
	return c, nil
}

func emitJSON(emit Emit, name string, v map[string]any) error {
	v["type"] = name
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return emit(name, b)
}

// Chunk handles one chunk's data; an error chunk returns an *AnthropicError.
func (t *ChunkToMessages) Chunk(data []byte, emit Emit) error {
	c, err := parseChunk(data)
	if err != nil {
		return err
	}
	if !t.started {
		t.started = true
		if err := emitJSON(emit, "message_start", map[string]any{"message": map[string]any{
			"id": messageID(c.ID), "type": "message", "role": "assistant", "model": t.model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]int64{"input_tokens": t.input, "output_tokens": 0},
		}}); err != nil {
			return err
		}
	}
	if c.Usage != nil {
		t.usage = c.Usage.Usage()
	}
	for _, ch := range c.Choices {
		d := ch.Delta
		reasoning := d.reasoning()
		if reasoning != nil && *reasoning != "" {
			if err := t.open("thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""}, emit); err != nil {
				return err
			}
			if err := t.delta("thinking_delta", "thinking", *reasoning, emit); err != nil {
				return err
			}
		}
		// A refusal (OpenAI's delta.refusal) is text, as the whole answer's
		// is: Claude declines in text too, with end_turn.
		for _, text := range []*string{d.Content, d.Refusal} {
			if text == nil || *text == "" {
				continue
			}
			if err := t.open("text", map[string]any{"type": "text", "text": ""}, emit); err != nil {
				return err
			}
			if err := t.delta("text_delta", "text", *text, emit); err != nil {
				return err
			}
		}
		for i := range d.ToolCalls {
			tc := &d.ToolCalls[i]
			call := t.calls.call(tc)
			if _, ok := t.tools[call]; !ok {
				if len(t.tools) >= maxStreamBlocks {
					return malformed("too many tool calls")
				}
				if err := t.open("tool_use", map[string]any{"type": "tool_use", "id": callID(tc.ID, "toolu_"), "name": tc.Function.Name, "input": map[string]any{}}, emit); err != nil {
					return err
				}
				t.tools[call] = t.index
			}
			if tc.Function.Arguments != "" {
				if t.tools[call] != t.index {
					return malformed("interleaved tool call arguments")
				}
				if err := t.delta("input_json_delta", "partial_json", tc.Function.Arguments, emit); err != nil {
					return err
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			t.finished = true
			t.finish = *ch.FinishReason
			t.stopSeq = stopSequence(t.stops, t.finish, ch.StopReason, ch.MatchedStop)
		}
	}
	return nil
}

// open starts a block of kind unless one is open already.
func (t *ChunkToMessages) open(kind string, block map[string]any, emit Emit) error {
	// A tool call always opens a block of its own.
	if t.kind == kind && kind != "tool_use" && t.index >= 0 {
		return nil
	}
	if err := t.closeBlock(emit); err != nil {
		return err
	}
	t.index = t.blocks
	t.blocks++
	t.kind = kind
	return emitJSON(emit, "content_block_start", map[string]any{"index": t.index, "content_block": block})
}

// delta emits a content_block_delta of the open block whose delta is
// {"type": kind, field: text}, written as emitJSON would (keys sorted, no
// HTML escaping) but without a map: it is most of a stream's events.
func (t *ChunkToMessages) delta(kind, field, text string, emit Emit) error {
	b := make([]byte, 0, len(`{"delta":{"":,"type":""},"index":,"type":"content_block_delta"}`)+len(field)+len(kind)+len(text)+24)
	b = append(b, `{"delta":{"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = appendString(b, text)
	b = append(b, `,"type":"`...)
	b = append(b, kind...)
	b = append(b, `"},"index":`...)
	b = appendInt(b, int64(t.index))
	b = append(b, `,"type":"content_block_delta"}`...)
	return emit("content_block_delta", b)
}

func (t *ChunkToMessages) closeBlock(emit Emit) error {
	if t.index < 0 || t.kind == "" {
		return nil
	}
	t.kind = ""
	b := append(appendInt([]byte(`{"index":`), int64(t.index)), `,"type":"content_block_stop"}`...)
	return emit("content_block_stop", b)
}

// Done takes the upstream's [DONE]: the answer is whole even when no chunk
// named its finish reason (some compatible servers name none), and ends as
// a "stop" would have ended it.
func (t *ChunkToMessages) Done() {
	if !t.finished {
		t.finished, t.finish = true, "stop"
	}
}

// Finish ends the message once the upstream's stream ended; it reports
// whether the answer was complete (a finish_reason was seen). Nothing is
// sent for an incomplete answer: the caller ends the stream with an error.
func (t *ChunkToMessages) Finish(emit Emit) (bool, error) {
	if !t.finished || !t.started {
		return false, nil
	}
	if t.stopped {
		return true, nil
	}
	t.stopped = true
	if err := t.closeBlock(emit); err != nil {
		return true, err
	}
	reason, seq := stopFields(t.finish, len(t.tools) > 0, t.stopSeq)
	if err := emitJSON(emit, "message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
		"usage": anthropicUsage(t.usage),
	}); err != nil {
		return true, err
	}
	return true, emit("message_stop", []byte(`{"type":"message_stop"}`))
}

// Usage is the accounting the upstream reported.
func (t *ChunkToMessages) Usage() Usage { return t.usage }

// IsDone reports whether data is the [DONE] marker.
func IsDone(data []byte) bool { return bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) }
