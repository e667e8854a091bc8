package chat

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// The Responses API (the only one a Responses-only upstream such as codex
// speaks) has no stop sequences. The gateway stops a chat or Messages
// answer from such an upstream at the request's sequences itself: the text
// ends right before the first of them, as OpenAI and Anthropic end it, the
// answer ends as a stop on a sequence does in the client's dialect, and the
// upstream is hung up on. Tool calls' arguments are no text a sequence
// stops.

// stopText ends an answer's text at the first of a request's stop
// sequences (the first to be complete, as the text arrives). Text that may
// be the start of a sequence is held back, at most the longest sequence
// less one character, until what follows shows whether it is. Each byte of
// the text costs a step or so per sequence, however long the sequences
// and however the text is split (a sequence is followed as
// Knuth-Morris-Pratt follows it); an empty sequence stops nothing. Not safe
// for concurrent use.
type stopText struct {
	seqs []string
	// at[i] is how much of seqs[i] the text ends with: its longest
	// beginning the text ends with.
	at []int
	// back[i][k] is, for seqs[i], how much of it its first k+1 bytes end
	// with, shorter than k+1; built as far as the text has matched.
	back [][]int32
	// held is the text held back, the longest of those beginnings.
	held string
}

// push takes the next piece of the text: out is what may go on now; seq,
// when not "", is the sequence the text stopped at, and out the last of the
// text.
func (s *stopText) push(text string) (out, seq string) {
	if s.at == nil {
		s.at, s.back = make([]int, len(s.seqs)), make([][]int32, len(s.seqs))
	}
	held := s.held
	for p := 0; p < len(text); p++ {
		c := text[p]
		found := -1
		for i, q := range s.seqs {
			if q == "" {
				continue
			}
			k := s.at[i]
			for k > 0 && q[k] != c {
				k = int(s.backOf(i, k-1))
			}
			if q[k] == c {
				k++
			}
			s.at[i] = k
			// Of two that end here the longer began first.
			if k == len(q) && (found < 0 || len(q) > len(s.seqs[found])) {
				found = i
			}
		}
		if found >= 0 {
			// Where it begins in held+text: what it took of the text
			// before this piece was held.
			seq = s.seqs[found]
			s.reset()
			return prefix(held, text, len(held)+p+1-len(seq)), seq
		}
	}
	// The longest end of the text that begins a sequence is held: it is
	// that beginning of the sequence.
	keep, from := 0, ""
	for i, k := range s.at {
		if k > keep {
			keep, from = k, s.seqs[i]
		}
	}
	s.held = from[:keep]
	return prefix(held, text, len(held)+len(text)-keep), ""
}

// backOf is back[i][k], built as far as k first.
func (s *stopText) backOf(i, k int) int32 {
	q, b := s.seqs[i], s.back[i]
	if k < len(b) {
		return b[k]
	}
	for j := len(b); j <= k; j++ {
		if j == 0 {
			b = append(b, 0)
			continue
		}
		n := int(b[j-1])
		for n > 0 && q[j] != q[n] {
			n = int(b[n-1])
		}
		if q[j] == q[n] {
			n++
		}
		b = append(b, int32(n))
	}
	s.back[i] = b
	return b[k]
}

// prefix is the first n bytes of a followed by b.
func prefix(a, b string, n int) string {
	switch {
	case n <= len(a):
		return a[:n]
	case a == "":
		return b[:n]
	}
	return a + b[:n-len(a)]
}

// reset forgets the text: none of it begins a sequence.
func (s *stopText) reset() {
	s.held = ""
	clear(s.at)
}

// flush ends the text: what was held goes on.
func (s *stopText) flush() string {
	out := s.held
	s.reset()
	return out
}

// cut is text ended at the first of the sequences, and the sequence it
// ended at ("" when none: text as it is), text on its own.
func (s *stopText) cut(text string) (string, string) {
	s.reset()
	out, seq := s.push(text)
	if seq == "" {
		out += s.flush()
	}
	return out, seq
}

// cutText is text ended at the first of seqs, and the sequence it ended at
// ("" when none: text as it is).
func cutText(text string, seqs []string) (string, string) {
	s := stopText{seqs: seqs}
	return s.cut(text)
}

// textPart is the part of an answer a Responses stream's text deltas add
// to: their output_index and content_index. Text that moves to another
// part, announced or not, is a text of its own to stop, as each part of a
// whole answer is (cutResponse).
type textPart struct {
	output, content int
	started         bool
}

// moved takes a text delta's indexes (no output index: the last delta's)
// and reports whether they name another part than the last delta's.
func (p *textPart) moved(output *int, content int) bool {
	o := p.output
	if output != nil {
		o = *output
	}
	moved := p.started && (o != p.output || content != p.content)
	p.output, p.content, p.started = o, content, true
	return moved
}

// requestStops are the stop sequences of a chat request (stop, a string or
// an array) or a Messages one (stop_sequences), without empty ones and
// repeats; none for a Responses request, which has no such field. A stop
// of another shape is none here: the request's translation refuses it.
func requestStops(in inbound) []string {
	var raw json.RawMessage
	switch in.dialect {
	case DialectChat:
		raw = in.fields["stop"]
	case DialectMessages:
		raw = in.fields["stop_sequences"]
	default:
		return nil
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var list []string
	var one string
	if unquote(raw, &one) {
		list = []string{one}
	} else if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []string
	for _, q := range list {
		if q != "" && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// stopStream stops a Responses stream on its way to chat chunks at a
// request's stop sequences: the text deltas go through stopText, what it
// held goes on before any other event, and at a sequence the answer ends
// (ResponsesToChunks.Stop). It counts the text of the chunks it passes on,
// for the estimate billed when it stopped the answer (billedStop), which
// the answer's end carries.
type stopStream struct {
	in   inbound
	text stopText
	part textPart
	// named: the finish chunk names the sequence (for a Messages answer,
	// whose stop_sequence says which).
	named bool
	// seq is the sequence the answer stopped at; billed its usage then.
	seq    string
	chars  int64
	billed Usage
}

// newStopStream returns the stopper of a request's stream, nil when it has
// no stop sequences.
func newStopStream(in inbound, named bool) *stopStream {
	seqs := requestStops(in)
	if len(seqs) == 0 {
		return nil
	}
	return &stopStream{in: in, text: stopText{seqs: seqs}, named: named}
}

// event passes one upstream event through tr, whose chunks go to emit; a
// nil stopper (no stop sequences) passes it as it is.
func (s *stopStream) event(tr *translate.ResponsesToChunks, name string, data []byte, emit func([]byte) error) error {
	if s == nil {
		return tr.Event(name, data, emit)
	}
	counted := func(c []byte) error {
		if err := emit(c); err != nil {
			return err
		}
		s.chars += deliveredChars("", c)
		return nil
	}
	const textDelta = "response.output_text.delta"
	var ev struct {
		Type  string `json:"type"`
		Delta string `json:"delta"`
	}
	var at struct {
		OutputIndex  *int `json:"output_index"`
		ContentIndex int  `json:"content_index"`
	}
	// Only an event that may be a text delta is read here (the data's type
	// names an event the stream does not name).
	if name == "" || name == textDelta {
		if json.Unmarshal(data, &ev) != nil {
			return tr.Event(name, data, counted) // which says it is malformed
		}
		if name == "" {
			name = ev.Type
		}
		if name == textDelta && json.Unmarshal(data, &at) != nil {
			return errMalformedEvent // as assembling it says
		}
	}
	if name != textDelta || s.part.moved(at.OutputIndex, at.ContentIndex) {
		if held := s.text.flush(); held != "" {
			if err := tr.Text(held, counted); err != nil {
				return err
			}
		}
	}
	if name != textDelta {
		return tr.Event(name, data, counted)
	}
	out, seq := s.text.push(ev.Delta)
	if out != "" {
		if err := tr.Text(out, counted); err != nil {
			return err
		}
	}
	if seq == "" {
		return nil
	}
	s.seq = seq
	s.billed = billedStop(s.in, s.chars, fromTranslate(tr.Usage()))
	named := ""
	if s.named {
		named = seq
	}
	return tr.Stop(named, toTranslate(s.billed), counted)
}

// usage is the stream's usage: billed when it stopped at a sequence,
// reported otherwise.
func (s *stopStream) usage(reported Usage) Usage {
	if s == nil || s.seq == "" {
		return reported
	}
	return s.billed
}

// cutResponse ends a whole Responses answer at the first of stops in its
// text, part by part as stopStream ends a stream's: the text part ends
// before the sequence, and the parts and items after it are left out. seq
// is the sequence it ended at ("" when none: raw as it is). An answer ended
// without the upstream's usage (an assembled stream the gateway hung up on)
// gets the gateway's estimate of its output and of the request's text
// (billedStop), estimated then true.
func cutResponse(in inbound, raw []byte, stops []string) (out []byte, seq string, estimated bool) {
	if len(stops) == 0 {
		return raw, "", false
	}
	var resp map[string]json.RawMessage
	var items []map[string]json.RawMessage
	if json.Unmarshal(raw, &resp) != nil || json.Unmarshal(resp["output"], &items) != nil {
		return raw, "", false // the translation says what is wrong with it
	}
	cut := stopText{seqs: stops}
	for i, it := range items {
		var typ string
		if json.Unmarshal(it["type"], &typ) != nil || typ != "message" {
			continue
		}
		var parts []map[string]json.RawMessage
		if json.Unmarshal(it["content"], &parts) != nil {
			continue
		}
		for j, p := range parts {
			var text string
			if json.Unmarshal(p["type"], &typ) != nil || typ != "output_text" || json.Unmarshal(p["text"], &text) != nil {
				continue
			}
			before, found := cut.cut(text)
			if found == "" {
				continue
			}
			p["text"], _ = json.Marshal(before)
			it["content"], _ = json.Marshal(parts[:j+1])
			output, err := json.Marshal(items[:i+1])
			if err != nil {
				return raw, "", false
			}
			resp["output"] = output
			resp["status"] = json.RawMessage(`"completed"`)
			delete(resp, "incomplete_details")
			if u := resp["usage"]; len(u) == 0 || string(u) == "null" {
				est := billedStop(in, outputChars(output), Usage{})
				resp["usage"], _ = json.Marshal(map[string]int64{"input_tokens": est.PromptTokens, "output_tokens": est.CompletionTokens, "total_tokens": est.TotalTokens})
				estimated = est.Estimated
			}
			out, err := json.Marshal(resp)
			if err != nil {
				return raw, "", false
			}
			return out, found, estimated
		}
	}
	return raw, "", false
}

// outputChars counts the characters of a Responses output a client is
// shown: text, reasoning summaries, tool calls' arguments.
func outputChars(output []byte) int64 {
	var items []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Summary []struct {
			Text string `json:"text"`
		} `json:"summary"`
		Arguments string `json:"arguments"`
	}
	_ = json.Unmarshal(output, &items)
	var n int
	for _, it := range items {
		for _, c := range it.Content {
			n += utf8.RuneCountInString(c.Text)
		}
		for _, s := range it.Summary {
			n += utf8.RuneCountInString(s.Text)
		}
		n += utf8.RuneCountInString(it.Arguments)
	}
	return int64(n)
}

// namedStop names seq, the sequence a chat completion stopped at, in its
// choice's stop_reason, as vLLM's completions do: OpenAIToAnthropicResponse
// reads it for the Messages answer's stop_sequence.
func namedStop(body []byte, seq string) []byte {
	var c map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(body, &c) != nil || json.Unmarshal(c["choices"], &choices) != nil || len(choices) == 0 {
		return body
	}
	choices[0]["stop_reason"], _ = json.Marshal(seq)
	var err error
	if c["choices"], err = json.Marshal(choices); err != nil {
		return body
	}
	out, err := json.Marshal(c)
	if err != nil {
		return body
	}
	return out
}
