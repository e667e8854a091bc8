package chat

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// messagesAnthropic is Anthropic Messages to an Anthropic-shaped upstream:
// a pass-through (model swapped), with the client's anthropic-version and
// anthropic-beta forwarded.
type messagesAnthropic struct{ toAnthropic }

func (messagesAnthropic) errorBody(raw []byte) []byte { return raw }

// forwardedAnthropic are the client headers an Anthropic-shaped upstream gets.
var forwardedAnthropic = []string{"anthropic-version", "anthropic-beta"}

func (messagesAnthropic) header(h http.Header, in inbound) {
	for _, k := range forwardedAnthropic {
		if v := in.header[k]; v != "" {
			h.Set(k, v)
		}
	}
}

func (messagesAnthropic) request(in inbound, model string) ([]byte, error) {
	m, _ := json.Marshal(model)
	set := map[string]json.RawMessage{"model": m}
	if msgs, ok := anthropicMessages(in.fields["messages"]); ok {
		set["messages"] = msgs
	}
	return in.withFields(set)
}

// anthropicMessages is a Messages request's messages as an Anthropic-shaped
// upstream takes them: without unsigned thinking, with another upstream's
// tool ids made ones Anthropic takes; ok is false when they go as they are.
func anthropicMessages(msgs json.RawMessage) (json.RawMessage, bool) {
	changed := false
	if m, ok := withoutUnsignedThinking(msgs); ok {
		msgs, changed = m, true
	}
	if m, ok := withAnthropicToolIDs(msgs); ok {
		msgs, changed = m, true
	}
	return msgs, changed
}

// withAnthropicToolIDs makes a Messages request's tool_use ids, and its
// tool results' tool_use_id, ones Anthropic takes (translate.ToolID): a
// conversation a chat upstream served holds that upstream's call ids
// (Kimi's "functions.get_weather:0"), which Anthropic refuses ("String
// should match pattern"), so one moved to an Anthropic-shaped upstream (a
// model switched, a combo's fallback) could not go on. ok is false when
// every id was one already (the messages then go up untouched).
func withAnthropicToolIDs(raw json.RawMessage) (json.RawMessage, bool) {
	if !oddToolID(raw) {
		return nil, false
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return nil, false // the upstream judges a body we cannot read
	}
	changed := false
	for _, m := range msgs {
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(m["content"], &blocks) != nil {
			continue
		}
		touched := false
		for _, b := range blocks {
			var typ string
			_ = json.Unmarshal(b["type"], &typ)
			key := ""
			switch typ {
			case "tool_use":
				key = "id"
			case "tool_result":
				key = "tool_use_id"
			default:
				continue
			}
			var id string
			if json.Unmarshal(b[key], &id) != nil || translate.ToolID(id) == id {
				continue
			}
			b[key], _ = json.Marshal(translate.ToolID(id))
			touched = true
		}
		if touched {
			m["content"], _ = json.Marshal(blocks)
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return nil, false
	}
	return b, true
}

// oddToolID reports whether raw may hold an "id" or "tool_use_id" string
// with a byte Anthropic refuses in a tool id, read without decoding raw.
func oddToolID(raw []byte) bool {
	for _, key := range [][]byte{[]byte(`"id"`), []byte(`"tool_use_id"`)} {
		for rest := raw; ; {
			i := bytes.Index(rest, key)
			if i < 0 {
				break
			}
			rest = rest[i+len(key):]
			v := bytes.TrimLeft(rest, " \t\r\n")
			if len(v) == 0 || v[0] != ':' {
				continue
			}
			v = bytes.TrimLeft(v[1:], " \t\r\n")
			if len(v) == 0 || v[0] != '"' {
				continue
			}
			for _, c := range v[1:] {
				if c == '"' {
					break
				}
				if !translate.ToolIDByte(c) {
					return true
				}
			}
		}
	}
	return false
}

// withoutUnsignedThinking drops the thinking blocks without a signature
// from a Messages request's messages: the gateway renders a non-Anthropic
// upstream's reasoning as thinking blocks with an empty signature (it cannot
// sign them), and a client such as Claude Code sends them back on the next
// turn; an Anthropic upstream refuses a thinking block whose signature it
// did not make. ok is false when nothing was dropped (the body then goes up
// untouched).
func withoutUnsignedThinking(raw json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(raw, []byte(`"thinking"`)) {
		return nil, false
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return nil, false // the upstream judges a body we cannot read
	}
	changed := false
	kept := msgs[:0]
	for _, m := range msgs {
		var blocks []json.RawMessage
		if json.Unmarshal(m["content"], &blocks) != nil {
			kept = append(kept, m)
			continue
		}
		out := blocks[:0]
		for _, b := range blocks {
			var blk struct {
				Type      string  `json:"type"`
				Signature *string `json:"signature"`
			}
			if json.Unmarshal(b, &blk) == nil && blk.Type == "thinking" && (blk.Signature == nil || *blk.Signature == "") {
				changed = true
				continue
			}
			out = append(out, b)
		}
		if len(out) == 0 && len(blocks) > 0 {
			continue // a message that held nothing else goes too
		}
		if len(out) != len(blocks) {
			m["content"], _ = json.Marshal(out)
		}
		kept = append(kept, m)
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, false
	}
	return b, true
}

func (messagesAnthropic) whole(_ inbound, raw []byte, _ string) ([]byte, Usage, error) {
	var msg struct {
		Type  string          `json:"type"`
		Usage *anthropicUsage `json:"usage"`
	}
	if json.Unmarshal(raw, &msg) != nil || msg.Type != "message" {
		return nil, Usage{}, badUpstream("upstream returned an invalid message")
	}
	var u anthropicUsage
	u.merge(msg.Usage)
	return raw, u.usage(), nil
}

func (messagesAnthropic) events(inbound, string) eventTranslator { return &anthropicEvents{} }

// anthropicEvents relays Anthropic's events as they are, reading usage
// from message_start and message_delta.
type anthropicEvents struct {
	u       anthropicUsage
	stopped bool
	// reasoned: a message_delta named the stop reason, which makes the
	// answer whole even when message_stop never follows (some compatible
	// servers send none).
	reasoned bool
	// last, lastName and chars are the event last relayed and its
	// delivered text, counted on the walk that read it (see counted).
	last     []byte
	lastName string
	chars    int64
}

// anthropicEvent is what the gateway reads of a Messages event.
type anthropicEvent struct {
	Type    string           `json:"type"`
	Message anthropicMessage `json:"message"`
	Usage   *anthropicUsage  `json:"usage"`
}

// anthropicMessage is what the gateway reads of a message: its usage.
type anthropicMessage *struct {
	Usage *anthropicUsage `json:"usage"`
}

// anthropicNames are the members of a Messages event walk looks for.
var anthropicNames = []string{"type", "message", "usage"}

// readAnthropicEvent reads a Messages event (ok false: malformed; its type
// only when name is empty) and its delivered text (as an event of that
// name, or -1 when name is not yet known). The event is walked once
// (walk.event); only a message or a usage (of
// message_start and message_delta) is decoded, and encoding/json decodes
// the whole event when the walk cannot tell what it would read.
func readAnthropicEvent(name string, data []byte) (anthropicEvent, bool, int64) {
	return readEvent(anthropicNames, name, data, func(ev *anthropicEvent, typ, message, usage []byte) bool {
		ev.Type = string(typ)
		return (message == nil || isNull(message) || json.Unmarshal(message, &ev.Message) == nil) &&
			(usage == nil || isNull(usage) || json.Unmarshal(usage, &ev.Usage) == nil)
	})
}

func (a *anthropicEvents) event(name string, data []byte, emit emitFunc) (bool, error) {
	ev, ok, chars := readAnthropicEvent(name, data)
	if !ok {
		return false, errMalformedEvent
	}
	if name == "" {
		name = ev.Type
		if name == "" && bytes.Contains(data, quotedError) {
			name = anthropicEventName(data)
		}
	}
	switch name {
	case "error":
		return false, anthropicEventError(data)
	case "message_start":
		if ev.Message != nil {
			a.u.merge(ev.Message.Usage)
		}
	case "message_delta":
		a.u.merge(ev.Usage)
		if r := member(member(data, "delta"), "stop_reason"); len(r) > 2 && r[0] == '"' {
			a.reasoned = true
		}
	case "message_stop":
		a.stopped = true
	}
	a.last, a.lastName, a.chars = data, name, chars
	if err := emit(name, data); err != nil {
		return false, err
	}
	return a.stopped, nil
}

func (a *anthropicEvents) counted(event string, data []byte) (int64, bool) {
	return a.chars, a.chars >= 0 && event == a.lastName && sameBytes(data, a.last)
}

// messageStop is the event that ends a message.
var messageStop = []byte(`{"type":"message_stop"}`)

// finish closes with message_stop an answer whose stop reason came but
// whose message_stop did not.
func (a *anthropicEvents) finish(emit emitFunc) (bool, error) {
	if a.stopped || !a.reasoned {
		return a.stopped, nil
	}
	a.stopped = true
	return true, emit("message_stop", messageStop)
}

func (a *anthropicEvents) usage() Usage { return a.u.usage() }
