package chat

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/internal/jsonscan"
	"github.com/switchboardhq/switchboard/internal/upstream"
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

func (chatOpenAI) whole(_ inbound, raw []byte, _ string) ([]byte, Usage, error) {
	w := walk{names: wholeNames}
	if !w.run(raw) {
		return nil, Usage{}, badUpstream("upstream returned invalid JSON")
	}
	// Only the usage is decoded; the answer passes through as it came.
	v, errV, choices := w.member(0), w.member(1), w.member(2)
	if w.odd {
		v, errV, choices = member(raw, "usage"), member(raw, "error"), member(raw, "choices")
	}
	if choices == nil && (errV == nil || isNull(errV)) && isErrorObject(raw) {
		errV = raw
	}
	if errV != nil && !isNull(errV) && choices == nil {
		// An error answered with a 200 (some providers do): a failed
		// attempt, as it is in a stream, not a completion to pass on.
		return nil, Usage{}, errorIn200(errV)
	}
	var u usageJSON
	if v != nil && !isNull(v) {
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
	// done: the stream ended with [DONE], which makes an answer whole
	// even when no chunk named its finish reason (some compatible servers
	// name none).
	done bool
	u    Usage
	// last is the chunk last relayed and chars its delivered text, counted
	// on the walk that read it (see counted).
	last  []byte
	chars int64
}

func (o *openAIChunks) event(_ string, data []byte, emit emitFunc) (bool, error) {
	if bytes.Equal(data, []byte("[DONE]")) {
		o.done = true
		return true, nil
	}
	w := walk{names: chunkNames, text: chatMembers, choices: true}
	if !w.run(data) {
		return false, errMalformedEvent
	}
	c := w.chunkFacts()
	if c.err {
		return false, chatEventError(data)
	}
	if c.usage == nil && !c.finished && bytes.Contains(data, quotedError) {
		if ev := chunkError(data); ev != nil {
			return false, ev // an error object in a chunk's place
		}
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
	o.last, o.chars = data, w.chars
	return false, emit("", data)
}

func (o *openAIChunks) finish(emitFunc) (bool, error) {
	return o.finished || (o.done && o.last != nil), nil
}
func (o *openAIChunks) usage() Usage { return o.u }

func (o *openAIChunks) counted(event string, data []byte) (int64, bool) {
	return o.chars, event == "" && sameBytes(data, o.last)
}

// chunkFacts are what the gateway needs from a chunk.
type chunkFacts struct {
	usage     *usageJSON
	usageOnly bool
	finished  bool
	err       bool
}

// wholeNames are the members of a whole answer walk looks for.
var wholeNames = []string{"usage", "error", "choices"}

// errorIn200 is the upstream error of an answer whose status said success
// but whose body holds an error object and no choices, with the status the
// error stands for (upstream.OpenAIError), so the engine cools or falls over as for
// that status.
func errorIn200(errV []byte) error {
	body, status, ok := upstream.OpenAIError(errV)
	if !ok {
		// Not an OpenAI error object: the client gets the gateway's own.
		return badUpstream("the upstream answered an error with a success status")
	}
	return &credential.UpstreamError{Status: status, Body: body}
}

// invalidCompletion is the error of a whole answer a translation could not
// read as a completion: the error it holds in place of choices, read as
// the pass-through reads it (answeredError), else a bad upstream answer.
// A completion is translated without this second look.
func invalidCompletion(raw []byte) error {
	if err := answeredError(raw); err != nil {
		return err
	}
	return badUpstream("upstream returned an invalid completion")
}

// answeredError is errorIn200 for a whole answer that holds an error
// object and no choices, nil for any other.
func answeredError(raw []byte) error {
	if member(raw, "choices") != nil {
		return nil
	}
	if e := member(raw, "error"); e != nil && !isNull(e) {
		return errorIn200(e)
	}
	if isErrorObject(raw) {
		return errorIn200(raw)
	}
	return nil
}

// isErrorObject reports whether an answer is itself an error object
// ({"object":"error","message",...}, as vLLM answers), not one holding it.
func isErrorObject(raw []byte) bool {
	return string(member(raw, "object")) == `"error"`
}

// chunkNames are the members of a chunk that walk looks for: choices
// first (walk.choices).
var chunkNames = []string{"choices", "usage", "error"}

// chunkFacts are the facts of the chunk walked (with chunkNames and
// choices), as inspectMembers reads them: only the usage, when there is
// one, is read again.
func (w *walk) chunkFacts() chunkFacts {
	switch {
	case !w.object:
		return chunkFacts{}
	case w.odd:
		return inspectMembers(w.b)
	case w.bad:
		return chunkFacts{}
	}
	var f chunkFacts
	if u := w.found[1]; u.start >= 0 && !isNull(w.b[u.start:u.end]) {
		f.usage = new(usageJSON)
		f.usage.decode(w.b[u.start:u.end])
	}
	f.finished = w.finished
	f.usageOnly = f.usage != nil && w.n == 0
	e := w.found[2]
	f.err = e.start >= 0 && !isNull(w.b[e.start:e.end])
	return f
}

// inspectMembers reads a chunk's facts by decoding the members they come
// from: for chunks whose member names the walk leaves to it (walk.odd).
func inspectMembers(data []byte) chunkFacts {
	var f chunkFacts
	var choices, usage, errv []byte
	if !jsonscan.Members(data, func(k, v []byte) bool {
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
		f.usage.decode(usage)
	}
	n := 0
	if choices != nil && !isNull(choices) {
		ok := jsonscan.Elements(choices, func(c []byte) bool {
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
