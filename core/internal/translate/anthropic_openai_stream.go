package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// maxStreamBlocks bounds the content blocks one stream may open, so a
// hostile upstream cannot grow the translator without end.
const maxStreamBlocks = 4096

// StreamTranslator turns an Anthropic message stream into OpenAI
// chat.completion.chunk payloads. Feed it every server-sent event in order;
// it is not safe for concurrent use.
//
// Every chunk carries the same id ("chatcmpl-" + the message id), object,
// created and model, and, when the client asked for usage, "usage":null
// until the final usage chunk, as OpenAI sends them. Tool calls are
// numbered 0, 1, 2… in the order their tool_use blocks start, whatever the
// Anthropic block indices, and their argument fragments are passed on as
// they arrive (never held back until a block ends).
type StreamTranslator struct {
	model        string
	includeUsage bool

	started  bool // message_start seen
	finished bool // finish_reason chunk sent
	done     bool // message_stop seen and translated

	prefix []byte // each chunk's opening, through `"choices":[`
	buf    []byte // the chunk being built; reused once emit returns
	blocks []streamBlock
	tools  int
	usage  msgUsage
	ev     streamEvent

	// reasoned: reasoning was sent; thinkingBreak: the open thinking
	// block's text is to start with reasoningBreak, apart from the
	// reasoning sent before it.
	reasoned, thinkingBreak bool
}

type blockKind uint8

const (
	blockOther blockKind = iota // server tools, redacted thinking, …: dropped
	blockText
	blockThinking
	blockTool
)

type streamBlock struct {
	index int64
	kind  blockKind
	tool  int  // OpenAI tool call index, for blockTool
	args  bool // an arguments fragment was sent
	// input is the tool_use block's starting input when not {}: sent as
	// the arguments if no input_json_delta follows.
	input []byte
}

// streamEvent holds the fields of every Anthropic stream event type.
type streamEvent struct {
	Type    string `json:"type"`
	Message struct {
		ID    string   `json:"id"`
		Usage msgUsage `json:"usage"`
	} `json:"message"`
	Index        int64 `json:"index"`
	ContentBlock struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage msgUsage `json:"usage"`
}

// NewStreamTranslator returns a translator whose chunks name model;
// includeUsage (the client's stream_options.include_usage) adds the final
// usage chunk with empty choices.
func NewStreamTranslator(model string, includeUsage bool) *StreamTranslator {
	return &StreamTranslator{model: model, includeUsage: includeUsage, buf: make([]byte, 0, 512)}
}

// Event translates one server-sent event, given by its event name (when
// the upstream omits `event:` lines, pass "" and the data's type is used)
// and data, calling emit for each chunk it produces. The chunk is the data
// of one `data:` line without the prefix; it is only valid until emit
// returns. An emit error is returned as is.
//
// An `error` event returns an *AnthropicError (end the stream with an
// in-band error); an event out of order or not valid JSON returns an error
// matching ErrMalformedUpstream. ping and unknown events produce nothing;
// so does everything after message_stop. Nothing is emitted before
// message_start, so an error up to then can still fail over.
func (t *StreamTranslator) Event(name string, data []byte, emit func(chunk []byte) error) error {
	if t.done {
		return nil
	}
	switch name {
	case "ping":
		return nil
	case "error":
		return parseAnthropicError(data)
	case "", "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
	default:
		return nil // a new event type: nothing to say
	}
	t.ev = streamEvent{}
	if err := json.Unmarshal(data, &t.ev); err != nil {
		if name == "" {
			name = "unnamed"
		}
		return malformed(name + " event is not valid JSON")
	}
	if name == "" {
		switch name = t.ev.Type; name {
		case "":
			if bytes.Contains(data, []byte(`"error"`)) {
				if e := errorOf(data); e != nil {
					return e // an error with no type, in OpenAI's shape (some compatible upstreams send one)
				}
			}
			return nil
		case "ping":
			return nil
		case "error":
			return parseAnthropicError(data)
		}
	}
	if name == "message_start" {
		return t.messageStart(emit)
	}
	if !t.started {
		switch name {
		case "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
			return malformed(name + " before message_start")
		}
		return nil
	}
	switch name {
	case "content_block_start":
		return t.blockStart(emit)
	case "content_block_delta":
		return t.blockDelta(emit)
	case "content_block_stop":
		return t.blockStop(emit)
	case "message_delta":
		return t.messageDelta(emit)
	case "message_stop":
		return t.messageStop(emit)
	}
	return nil
}

// Done reports whether message_stop arrived and was translated: the stream
// ended cleanly. A stream that stops before is cut and must end with an
// in-band error, never [DONE].
func (t *StreamTranslator) Done() bool { return t.done }

// End is the end of the upstream's stream: a stream whose message_delta
// named the stop reason is whole without message_stop (some compatible
// servers never send it), and is closed as message_stop closes it (Done
// after). Other streams are left as they are.
func (t *StreamTranslator) End(emit func(chunk []byte) error) error {
	if t.done || !t.finished {
		return nil
	}
	return t.messageStop(emit)
}

// Usage is the usage so far (final once Done).
func (t *StreamTranslator) Usage() Usage { return t.usage.usage() }

func (t *StreamTranslator) messageStart(emit func([]byte) error) error {
	if t.started {
		return malformed("second message_start")
	}
	t.started = true
	t.usage = t.ev.Message.Usage
	p := make([]byte, 0, 128+len(t.ev.Message.ID)+len(t.model))
	p = append(p, `{"id":`...)
	p = appendString(p, completionID(t.ev.Message.ID))
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = appendInt(p, time.Now().Unix())
	p = append(p, `,"model":`...)
	p = appendString(p, t.model)
	p = append(p, `,"system_fingerprint":null,"choices":[`...)
	t.prefix = p
	b := t.open()
	b = append(b, `{"role":"assistant","content":"","refusal":null}`...)
	return t.close(b, "", emit)
}

func (t *StreamTranslator) blockStart(emit func([]byte) error) error {
	if len(t.blocks) >= maxStreamBlocks {
		return malformed("too many content blocks")
	}
	cb := &t.ev.ContentBlock
	blk := streamBlock{index: t.ev.Index}
	switch cb.Type {
	case "text":
		blk.kind = blockText
	case "thinking":
		blk.kind = blockThinking
	case "tool_use":
		if cb.ID == "" || cb.Name == "" {
			return malformed("tool_use block without id or name")
		}
		if !isNull(cb.Input) {
			if !isJSONObject(cb.Input) {
				return malformed("tool_use input is not an object")
			}
			var c bytes.Buffer
			if json.Compact(&c, cb.Input) == nil && c.String() != "{}" {
				blk.input = c.Bytes()
			}
		}
		blk.kind, blk.tool = blockTool, t.tools
		t.tools++
	}
	t.blocks = append(t.blocks, blk)
	switch blk.kind {
	case blockText:
		return t.text(`{"content":`, cb.Text, emit)
	case blockThinking:
		t.thinkingBreak = t.reasoned
		return t.thinking(cb.Thinking, emit)
	case blockTool:
		b := t.open()
		b = append(b, `{"tool_calls":[{"index":`...)
		b = appendInt(b, int64(blk.tool))
		b = append(b, `,"id":`...)
		b = appendString(b, cb.ID)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendString(b, cb.Name)
		b = append(b, `,"arguments":""}}]}`...)
		return t.close(b, "", emit)
	}
	return nil
}

func (t *StreamTranslator) blockDelta(emit func([]byte) error) error {
	blk := t.block(t.ev.Index)
	d := &t.ev.Delta
	switch d.Type {
	case "text_delta":
		if blk != nil && blk.kind != blockText {
			return t.mismatch(blk, d.Type)
		}
		return t.text(`{"content":`, d.Text, emit)
	case "thinking_delta":
		if blk != nil && blk.kind != blockThinking {
			return t.mismatch(blk, d.Type)
		}
		return t.thinking(d.Thinking, emit)
	case "input_json_delta":
		if blk == nil {
			return malformed("input_json_delta for a block that never started")
		}
		switch blk.kind {
		case blockOther:
			return nil // a server tool's input
		case blockTool:
		default:
			return t.mismatch(blk, d.Type)
		}
		if d.PartialJSON == "" {
			return nil
		}
		blk.args = true
		return t.arguments(blk.tool, d.PartialJSON, emit)
	}
	return nil // signature_delta, citations_delta, …
}

func (t *StreamTranslator) mismatch(blk *streamBlock, delta string) error {
	if blk.kind == blockOther {
		return nil
	}
	return malformed(delta + " in content block " + strconv.FormatInt(blk.index, 10) + " of another type")
}

func (t *StreamTranslator) blockStop(emit func([]byte) error) error {
	if blk := t.block(t.ev.Index); blk != nil {
		return t.completeArguments(blk, emit)
	}
	return nil
}

// completeAllArguments completes the tool calls of blocks the upstream
// never stopped.
func (t *StreamTranslator) completeAllArguments(emit func([]byte) error) error {
	for i := range t.blocks {
		if err := t.completeArguments(&t.blocks[i], emit); err != nil {
			return err
		}
	}
	return nil
}

// completeArguments gives a tool call that got no argument fragments its
// starting input or "{}", so every call ends with arguments that parse as
// JSON (clients parse them; "" fails).
func (t *StreamTranslator) completeArguments(blk *streamBlock, emit func([]byte) error) error {
	if blk.kind != blockTool || blk.args {
		return nil
	}
	blk.args = true
	args := "{}"
	if blk.input != nil {
		args = string(blk.input)
	}
	return t.arguments(blk.tool, args, emit)
}

func (t *StreamTranslator) messageDelta(emit func([]byte) error) error {
	// message_delta usage counts are cumulative; some compatible upstreams
	// only fill the input side here, so any positive count wins.
	u := &t.ev.Usage
	if u.OutputTokens > 0 {
		t.usage.OutputTokens = u.OutputTokens
	}
	if u.InputTokens > 0 {
		t.usage.InputTokens = u.InputTokens
	}
	if u.CacheReadInputTokens > 0 {
		t.usage.CacheReadInputTokens = u.CacheReadInputTokens
	}
	if u.CacheCreationInputTokens > 0 {
		t.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
	}
	if t.ev.Delta.StopReason == "" || t.finished {
		return nil
	}
	return t.finish(finishReason(t.ev.Delta.StopReason), emit)
}

func (t *StreamTranslator) messageStop(emit func([]byte) error) error {
	if !t.finished {
		reason := "stop"
		if t.tools > 0 {
			reason = "tool_calls"
		}
		if err := t.finish(reason, emit); err != nil {
			return err
		}
	} else if err := t.completeAllArguments(emit); err != nil { // blocks started after the finish
		return err
	}
	if t.includeUsage {
		b := append(t.buf[:0], t.prefix...)
		b = append(b, `],"usage":`...)
		b = appendUsage(b, t.usage.usage())
		b = append(b, '}')
		t.buf = b
		if err := emit(b); err != nil {
			return err
		}
	}
	t.done = true
	return nil
}

func (t *StreamTranslator) finish(reason string, emit func([]byte) error) error {
	if err := t.completeAllArguments(emit); err != nil {
		return err
	}
	t.finished = true
	b := t.open()
	b = append(b, "{}"...)
	return t.close(b, reason, emit)
}

// block finds a started block by its Anthropic index (the latest, if an
// upstream reuses one).
func (t *StreamTranslator) block(index int64) *streamBlock {
	for i := len(t.blocks) - 1; i >= 0; i-- {
		if t.blocks[i].index == index {
			return &t.blocks[i]
		}
	}
	return nil
}

// text emits a content or reasoning_content delta; key is the opening
// `{"field":`.
func (t *StreamTranslator) text(key, s string, emit func([]byte) error) error {
	if s == "" {
		return nil
	}
	b := t.open()
	b = append(b, key...)
	b = appendString(b, s)
	b = append(b, '}')
	return t.close(b, "", emit)
}

// thinking emits a thinking block's text as a reasoning_content delta: a
// block's first text after an earlier block's starts with reasoningBreak,
// as the whole answer's blocks are joined (AnthropicToOpenAIResponse).
func (t *StreamTranslator) thinking(s string, emit func([]byte) error) error {
	if s == "" {
		return nil
	}
	if t.thinkingBreak {
		t.thinkingBreak = false
		s = reasoningBreak + s
	}
	t.reasoned = true
	return t.text(`{"reasoning_content":`, s, emit)
}

func (t *StreamTranslator) arguments(tool int, fragment string, emit func([]byte) error) error {
	b := t.open()
	b = append(b, `{"tool_calls":[{"index":`...)
	b = appendInt(b, int64(tool))
	b = append(b, `,"function":{"arguments":`...)
	b = appendString(b, fragment)
	b = append(b, "}}]}"...)
	return t.close(b, "", emit)
}

// open starts a chunk with one choice, up to its delta.
func (t *StreamTranslator) open() []byte {
	b := append(t.buf[:0], t.prefix...)
	return append(b, `{"index":0,"delta":`...)
}

// close ends the chunk open started and emits it; finish "" is null.
func (t *StreamTranslator) close(b []byte, finish string, emit func([]byte) error) error {
	b = append(b, `,"finish_reason":`...)
	b = appendNullableString(b, finish)
	b = append(b, "}]"...)
	if t.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, '}')
	t.buf = b
	return emit(b)
}
