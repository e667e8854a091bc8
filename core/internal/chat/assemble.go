package chat

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/sse"
)

// assembler is an upstream shape that can build its whole answer from its
// own stream: what a non-streamed request gets from an upstream that only
// streams (provider.Spec.StreamOnly).
type assembler interface {
	// assemble reads the upstream's stream to its end and returns the
	// non-streamed answer body it amounts to; event is called on every
	// event read, comment on every keep-alive comment (the watchdog's
	// signs of life). With stop sequences (the request's, which the
	// upstream does not have) it stops reading at the first in the text:
	// the answer it returns then holds the text up to there, for whole to
	// end (stop.go).
	assemble(r io.Reader, stops []string, event, comment func()) ([]byte, error)
}

var _ assembler = toResponses{}

// assemble builds a Responses object from a Responses stream: the final
// response.completed (or response.incomplete) object, its output filled
// from the output_item.done events when the backend left it empty. At a
// stop sequence in the text (stopped), it is the response the stream began
// with, its output the items done and the message being written.
func (toResponses) assemble(r io.Reader, stops []string, event, comment func()) ([]byte, error) {
	rd := sse.NewReader(r, maxEvent)
	defer rd.Release() // what is kept of the events was copied from them
	rd.OnComment(comment)
	var items []json.RawMessage
	var st *stopped
	if len(stops) > 0 {
		st = &stopped{text: stopText{seqs: stops}}
	}
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil, badUpstream("the upstream ended the stream before it finished")
		}
		if err != nil {
			return nil, badUpstream("the upstream stream broke off")
		}
		event()
		var e struct {
			Type         string          `json:"type"`
			OutputIndex  *int            `json:"output_index"`
			ContentIndex int             `json:"content_index"`
			Item         json.RawMessage `json:"item"`
			Response     json.RawMessage `json:"response"`
			Error        json.RawMessage `json:"error"`
			Delta        string          `json:"delta"`
		}
		if len(ev.Data) == 0 || string(ev.Data) == "[DONE]" {
			continue
		}
		if json.Unmarshal(ev.Data, &e) != nil {
			return nil, badUpstream("the upstream sent a malformed event")
		}
		if e.Type == "" {
			e.Type = ev.Name
		}
		if st != nil && st.event(e.Type, e.OutputIndex, e.ContentIndex, e.Delta, e.Response) {
			return st.response(items)
		}
		switch e.Type {
		case "response.output_item.done":
			if e.OutputIndex != nil && *e.OutputIndex >= 0 && *e.OutputIndex < 4096 && len(e.Item) > 0 {
				for len(items) <= *e.OutputIndex {
					items = append(items, nil)
				}
				items[*e.OutputIndex] = e.Item
			}
		case "response.completed", "response.incomplete":
			return fillOutput(e.Response, items)
		case "response.failed", "error":
			// The backend's own error (context_length_exceeded is the
			// client's to act on), with the status it stands for.
			return nil, responsesEventError(e.Type, ev.Data)
		}
	}
}

// stopped follows an assembled stream's text through the request's stop
// sequences as a streamed answer's is (stopStream): the text of each part
// on its own, a sequence spanning its deltas included.
type stopped struct {
	text stopText
	part textPart
	// base is the response the stream began with.
	base json.RawMessage
	// written are the texts of the messages written, by output index,
	// each cut where stopText's text ended: where the deltas moved to
	// another part or another event came; index is the message written
	// last, run the text still being written (nil after another event).
	written map[int][]*strings.Builder
	index   int
	run     *strings.Builder
}

// event takes one event; it reports whether the text reached a sequence.
func (s *stopped) event(typ string, output *int, content int, delta string, resp json.RawMessage) bool {
	if typ == "response.created" || typ == "response.in_progress" {
		if len(resp) > 0 {
			s.base = resp
		}
	}
	if typ != "response.output_text.delta" {
		s.text.flush()
		s.run = nil
		return false
	}
	if s.part.moved(output, content) || s.run == nil {
		s.text.flush()
		if s.written == nil {
			s.written = map[int][]*strings.Builder{}
		}
		s.index, s.run = s.part.output, &strings.Builder{}
		s.written[s.index] = append(s.written[s.index], s.run)
	}
	s.run.WriteString(delta)
	_, seq := s.text.push(delta)
	return seq != ""
}

// response is the answer so far: the response the stream began with,
// completed, its output the items done and the messages written (the one
// written last in place of its item, done or not; its text up to the
// sequence and past it: whole ends it, and estimates its usage, which the
// upstream has not reported).
func (s *stopped) response(done []json.RawMessage) ([]byte, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(s.base, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
	}
	indexes := slices.Sorted(maps.Keys(s.written))
	for i, it := range done {
		if it != nil && s.written[i] == nil {
			indexes = append(indexes, i)
		}
	}
	slices.Sort(indexes)
	var output []json.RawMessage
	for _, i := range indexes {
		if i != s.index && i < len(done) && done[i] != nil {
			output = append(output, done[i])
			continue
		}
		content := make([]map[string]string, len(s.written[i]))
		for j, p := range s.written[i] {
			content[j] = map[string]string{"type": "output_text", "text": p.String()}
		}
		msg, err := json.Marshal(map[string]any{"type": "message", "role": "assistant", "status": "completed", "content": content})
		if err != nil {
			return nil, err
		}
		output = append(output, msg)
	}
	var err error
	if obj["output"], err = json.Marshal(output); err != nil {
		return nil, err
	}
	obj["status"] = json.RawMessage(`"completed"`)
	delete(obj, "usage")
	return json.Marshal(obj)
}

// fillOutput sets a response object's output to items when it has none.
func fillOutput(resp json.RawMessage, items []json.RawMessage) ([]byte, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(resp, &obj) != nil {
		return nil, badUpstream("upstream returned an invalid response")
	}
	var out []json.RawMessage
	_ = json.Unmarshal(obj["output"], &out)
	if len(out) > 0 || len(items) == 0 {
		return resp, nil
	}
	kept := items[:0]
	for _, it := range items {
		if it != nil {
			kept = append(kept, it)
		}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	obj["output"] = b
	return json.Marshal(obj)
}

// fitBody makes a request body one the upstream accepts: the members it
// refuses left out, those it requires set (provider.Spec's Omit and
// Require), the system prompt begun with the line it wants (SystemFirst),
// and "stream": true when a whole answer is to be assembled from
// its stream. A body that needs none of it is returned as it is.
func fitBody(body []byte, spec provider.Spec, stream bool) ([]byte, error) {
	first := spec.SystemFirst != "" && spec.Format == provider.FormatAnthropic
	if len(spec.Omit) == 0 && len(spec.Require) == 0 && !stream && !first {
		return body, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	if first {
		system, changed := withSystemFirst(obj["system"], spec.SystemFirst, spec.SystemFirstAlike)
		if !changed && len(spec.Omit) == 0 && len(spec.Require) == 0 && !stream {
			return body, nil
		}
		obj["system"] = system
	}
	for _, k := range spec.Omit {
		delete(obj, k)
	}
	for k, v := range spec.Require {
		obj[k] = json.RawMessage(v)
	}
	if stream {
		obj["stream"] = json.RawMessage("true")
	}
	return json.Marshal(obj)
}

// withSystemFirst is a Messages system prompt (absent, a string or text
// blocks) that begins with line: raw as it is (changed false) when one of
// its blocks already begins with it or with one of alike, as Claude Code's
// own requests do after their billing block, else line as a text block
// before the others. A system prompt of another shape is left to the
// upstream to judge.
func withSystemFirst(raw json.RawMessage, line string, alike []string) (json.RawMessage, bool) {
	// "..., running within the Claude Agent SDK." is Claude Code too.
	marks := []string{strings.TrimSuffix(line, ".")}
	for _, a := range alike {
		marks = append(marks, strings.TrimSuffix(a, "."))
	}
	begins := func(text string) bool {
		return slices.ContainsFunc(marks, func(m string) bool { return strings.HasPrefix(text, m) })
	}
	head, _ := json.Marshal(map[string]string{"type": "text", "text": line})
	var blocks []json.RawMessage
	var s string
	switch {
	case len(raw) == 0 || isNull(raw):
	case json.Unmarshal(raw, &s) == nil:
		if begins(s) {
			return raw, false
		}
		if s != "" {
			b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
			blocks = append(blocks, b)
		}
	case json.Unmarshal(raw, &blocks) == nil:
		for _, b := range blocks {
			var blk struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(b, &blk) == nil && blk.Type == "text" && begins(blk.Text) {
				return raw, false
			}
		}
	default:
		return raw, false
	}
	out, err := json.Marshal(append([]json.RawMessage{head}, blocks...))
	if err != nil {
		return raw, false
	}
	return out, true
}
