package chat

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// chatOpenAI is Chat Completions to an OpenAI-shaped upstream: a
// pass-through (model swapped; usage asked for on streams, for metering).
type chatOpenAI struct{ toChat }

func (chatOpenAI) header(http.Header, inbound) {}
func (chatOpenAI) errorBody(raw []byte) []byte { return raw }
func (chatOpenAI) events(in inbound, _ string) eventTranslator {
	return &openAIChunks{includeUsage: in.includeUsage}
}

func (chatOpenAI) request(in inbound, model string) ([]byte, error) {
	m, _ := json.Marshal(model)
	set := map[string]json.RawMessage{"model": m}
	if in.stream {
		set["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	}
	return in.withFields(set)
}

func (chatOpenAI) whole(raw []byte, _ string) ([]byte, Usage, error) {
	if !json.Valid(raw) {
		return nil, Usage{}, badUpstream("upstream returned invalid JSON")
	}
	// Only the usage is decoded; the answer passes through as it came.
	var u usageJSON
	if v := member(raw, "usage"); v != nil && !isNull(v) {
		u.decode(v)
	}
	return raw, u.usage(), nil
}

// openAIChunks relays chat.completion.chunk events as they are, reading
// their usage and finish reason; the usage-only chunk the gateway asked for
// is kept from a client that did not.
type openAIChunks struct {
	includeUsage bool
	finished     bool
	u            Usage
}

func (o *openAIChunks) event(_ string, data []byte, emit emitFunc) (bool, error) {
	if bytes.Equal(data, []byte("[DONE]")) {
		return true, nil
	}
	if !json.Valid(data) {
		return false, errMalformedEvent
	}
	c := inspect(data)
	if c.err {
		return false, errUpstreamEvent
	}
	if c.usage != nil {
		o.u = c.usage.usage()
		if c.usageOnly && !o.includeUsage {
			return false, nil // asked for the gateway's accounting, not the client's
		}
	}
	if c.finished {
		o.finished = true
	}
	return false, emit("", data)
}

func (o *openAIChunks) finish(emitFunc) (bool, error) { return o.finished, nil }
func (o *openAIChunks) usage() Usage                  { return o.u }

// chunkFacts are what the gateway needs from a chunk.
type chunkFacts struct {
	usage     *usageJSON
	usageOnly bool
	finished  bool
	err       bool
}

// inspect reads a chunk's usage, finish reason and error without decoding
// the common content chunk: only chunks that mention them are read, and of
// those only the members named (data passed json.Valid). A chunk whose
// members have the wrong types tells nothing.
func inspect(data []byte) chunkFacts {
	hasUsage := mentions(data, `"usage"`, `"usage":null`)
	hasFinish := mentions(data, `"finish_reason"`, `"finish_reason":null`)
	hasError := bytes.HasPrefix(bytes.TrimSpace(data), []byte(`{"error"`))
	if !hasUsage && !hasFinish && !hasError {
		return chunkFacts{}
	}
	return inspectMembers(data)
}

// mentions reports whether data holds name and not unset (which starts
// with name): the first unset, if any, is at or after the first name, so
// the chunk is scanned once, not twice.
func mentions(data []byte, name, unset string) bool {
	i := bytes.Index(data, []byte(name))
	return i >= 0 && !bytes.Contains(data[i:], []byte(unset))
}

// inspectMembers reads the members inspect needs.
func inspectMembers(data []byte) chunkFacts {
	var f chunkFacts
	var choices, usage, errv []byte
	if !members(data, func(k, v []byte) bool {
		switch {
		case bytes.EqualFold(k, []byte("choices")):
			choices = v
		case bytes.EqualFold(k, []byte("usage")):
			usage = v
		case bytes.EqualFold(k, []byte("error")):
			errv = v
		}
		return true
	}) {
		return chunkFacts{}
	}
	if usage != nil && !isNull(usage) {
		f.usage = new(usageJSON)
		if !f.usage.decode(usage) {
			return chunkFacts{}
		}
	}
	n := 0
	if choices != nil && !isNull(choices) {
		ok := elements(choices, func(c []byte) bool {
			n++
			if isNull(c) {
				return true
			}
			fr := member(c, "finish_reason")
			if c[0] != '{' || (fr != nil && fr[0] != '"' && !isNull(fr)) {
				n = -1
				return false
			}
			if fr != nil && len(fr) > 2 && fr[0] == '"' {
				f.finished = true
			}
			return true
		})
		if !ok || n < 0 {
			return chunkFacts{}
		}
	}
	f.usageOnly = f.usage != nil && n == 0
	f.err = errv != nil && !isNull(errv)
	return f
}
