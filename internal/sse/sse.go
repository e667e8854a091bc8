// Package sse reads server-sent events as upstream model APIs send them, and
// writes them as OpenAI's clients expect them.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// ErrTooLarge is returned for an event larger than the reader's limit.
var ErrTooLarge = errors.New("sse: event too large")

// Event is one dispatched event.
type Event struct {
	// Name is the event field; empty means "message".
	Name string
	// Data is the event's data lines joined by "\n". It is valid until the
	// next call to Next.
	Data []byte
}

// Reader reads events from a stream.
type Reader struct {
	br   *bufio.Reader
	max  int
	name []byte
	data []byte
	line []byte
	got  bool // the current event has at least one data line
	// named is the name of the last named event, handed out again while
	// the names repeat (as a stream's do) instead of a new string each.
	named string
	// released: the reader went back for another stream (Release).
	released bool
	// onComment is called for each comment line (see OnComment).
	onComment func()
}

// NewReader reads events of at most max bytes from r. A reader that
// Release hands back is used again.
func NewReader(r io.Reader, max int) *Reader {
	rd := readers.Get().(*Reader)
	rd.br.Reset(r)
	rd.max, rd.released = max, false
	return rd
}

// readers recycles readers, with their buffers, between streams.
var readers = sync.Pool{New: func() any { return &Reader{br: bufio.NewReaderSize(nil, bufSize)} }}

// bufSize is the size of a reader's buffer; keptSize bounds the event
// and line buffers a released reader keeps.
const (
	bufSize  = 16 << 10
	keptSize = 64 << 10
)

// OnComment has f called for each comment line the reader reads, in Next.
// A comment is no event and Next does not return it, but it is what
// servers send to show that a stream is alive while they have nothing to
// say (OpenRouter's ": OPENROUTER PROCESSING" while its model thinks): a
// watchdog that waits on the stream's silence counts it as life. f must
// not block.
func (r *Reader) OnComment(f func()) { r.onComment = f }

// Release hands the reader back for another stream: neither it nor the
// data of the events it returned may be used after. A second Release does
// nothing.
func (r *Reader) Release() {
	if r.released {
		return
	}
	r.released = true
	if cap(r.data) > keptSize || cap(r.line) > keptSize {
		return // left to the collector rather than kept
	}
	r.br.Reset(nil)
	*r = Reader{br: r.br, name: r.name[:0], data: r.data[:0], line: r.line[:0], released: true}
	readers.Put(r)
}

// Next returns the next event. It returns io.EOF at a clean end (after a
// complete event or at the start), io.ErrUnexpectedEOF when the stream ends
// inside an event, and the transport's error otherwise. OpenAI's end
// marker, "data: [DONE]", ends a stream even when the stream stops right
// after it, without the blank line (or the line end) that ends an event:
// some servers close there, and nothing can be missing from it.
func (r *Reader) Next() (Event, error) {
	r.name, r.data, r.got = r.name[:0], r.data[:0], false
	for {
		line, err := r.readLine()
		if err != nil {
			if r.doneAtEnd(err) {
				return Event{Name: r.nameString(), Data: r.data[:len(r.data):len(r.data)]}, nil
			}
			if errors.Is(err, io.EOF) && (r.got || len(r.name) > 0) {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if !r.got {
				r.name = r.name[:0]
				continue // an empty event (or stray blank line) is not dispatched
			}
			// Capped at its length: what the buffer held before is out of reach.
			return Event{Name: r.nameString(), Data: r.data[:len(r.data):len(r.data)]}, nil
		}
		if line[0] == ':' {
			// A comment (keep-alive): no part of an event.
			if r.onComment != nil {
				r.onComment()
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "data":
			if r.got {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.got = true
		case "event":
			r.name = append(r.name[:0], value...)
		}
		if len(r.data) > r.max {
			return Event{}, ErrTooLarge
		}
	}
}

// doneAtEnd reports whether the stream ended (err) with the event read so
// far being OpenAI's [DONE], whole but for its ending; r.data is then that
// event's data.
func (r *Reader) doneAtEnd(err error) bool {
	switch {
	case errors.Is(err, io.EOF): // the event's lines ended, the event did not
		return r.got && string(r.data) == "[DONE]"
	case errors.Is(err, io.ErrUnexpectedEOF) && !r.got: // its one line did not end
		field, value, ok := bytes.Cut(trimEnd(r.line), []byte{':'})
		if ok && string(field) == "data" && string(bytes.TrimPrefix(value, []byte{' '})) == "[DONE]" {
			r.data, r.got = append(r.data[:0], "[DONE]"...), true
			return true
		}
	}
	return false
}

// Ready reports whether the next event is already whole in the reader's
// buffer, so that Next will return it without waiting on the stream. A
// relay uses it to write events that arrived together in one go (one flush,
// one write to the client) instead of one by one, as a byte-copying proxy
// does. It errs towards false: an event still on its way is never waited
// for, only the lines Next would dispatch count (a keep-alive comment or an
// empty event is not an event).
func (r *Reader) Ready() bool {
	buf, _ := r.br.Peek(r.br.Buffered())
	data := false
	for len(buf) > 0 {
		end := bytes.IndexByte(buf, '\n')
		if end < 0 {
			return false // a line still on its way
		}
		line := bytes.TrimSuffix(buf[:end], []byte{'\r'})
		buf = buf[end+1:]
		switch {
		case len(line) == 0:
			if data {
				return true
			}
		case bytes.HasPrefix(line, []byte("data")) && (len(line) == 4 || line[4] == ':'):
			data = true
		}
	}
	return false
}

// nameString is the current event's name.
func (r *Reader) nameString() string {
	if len(r.name) == 0 {
		return ""
	}
	if string(r.name) != r.named {
		r.named = string(r.name)
	}
	return r.named
}

// readLine returns the next line without its end (\n or \r\n), valid
// until the next read.
func (r *Reader) readLine() ([]byte, error) {
	chunk, err := r.br.ReadSlice('\n')
	if err == nil && len(chunk) <= r.max+64 {
		// The whole line is in the buffer, as lines usually are: it is
		// used there, not copied.
		return trimEnd(chunk), nil
	}
	r.line = append(r.line[:0], chunk...)
	for err == bufio.ErrBufferFull && len(r.line) <= r.max+64 {
		chunk, err = r.br.ReadSlice('\n')
		r.line = append(r.line, chunk...)
	}
	if len(r.line) > r.max+64 {
		return nil, ErrTooLarge
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(r.line) > 0 {
			// A last line without its end is not a complete line.
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return trimEnd(r.line), nil
}

// trimEnd returns a line without its end (\n or \r\n).
func trimEnd(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'})
}

// Data frames a payload as one "data:" event.
func Data(payload []byte) []byte {
	b := make([]byte, 0, len(payload)+8)
	b = append(b, "data: "...)
	b = append(b, payload...)
	return append(b, '\n', '\n')
}

// AppendEvent frames one event onto b: its name, when it has one, and its
// data, a data line per line (an upstream may send an event's JSON over
// several data lines, which Reader joins with newlines, so it goes out as
// as many data lines, as SSE frames it).
func AppendEvent(b []byte, name string, data []byte) []byte {
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !more {
			return append(b, '\n')
		}
		data = rest
	}
}

// Done is the terminal event of an OpenAI stream.
var Done = []byte("data: [DONE]\n\n")

// KeepAlive is a comment every SSE client ignores, sent during long silences
// so proxies do not cut an idle stream.
var KeepAlive = []byte(": keep-alive\n\n")
