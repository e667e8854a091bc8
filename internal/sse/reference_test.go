package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// refReader is Reader as it was before it read whole lines in place and
// kept repeated names: the reference it must agree with.
type refReader struct {
	br   *bufio.Reader
	max  int
	name []byte
	data []byte
	line []byte
	got  bool // the current event has at least one data line
}

// newRefReader reads events of at most max bytes from r.
func newRefReader(r io.Reader, max int) *refReader {
	return &refReader{br: bufio.NewReaderSize(r, 16<<10), max: max}
}

// Next returns the next event. It returns io.EOF at a clean end (after a
// complete event or at the start), io.ErrUnexpectedEOF when the stream ends
// inside an event, and the transport's error otherwise.
func (r *refReader) Next() (Event, error) {
	r.name, r.data, r.got = r.name[:0], r.data[:0], false
	for {
		line, err := r.readLine()
		if err != nil {
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
			return Event{Name: string(r.name), Data: r.data}, nil
		}
		if line[0] == ':' {
			continue // a comment (keep-alive)
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

// readLine returns the next line without its end (\n or \r\n).
func (r *refReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.line = append(r.line, chunk...)
		if len(r.line) > r.max+64 {
			return nil, ErrTooLarge
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(r.line) > 0 {
				// A last line without its end is not a complete line.
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line := bytes.TrimSuffix(r.line, []byte{'\n'})
		return bytes.TrimSuffix(line, []byte{'\r'}), nil
	}
}

// sameEvents reads s with Reader and with refReader (limit max, the bytes
// handed over by read) and requires the same events and the same end.
func sameEvents(t *testing.T, s string, max int, read func(io.Reader) io.Reader) {
	t.Helper()
	got, want := NewReader(read(strings.NewReader(s)), max), newRefReader(read(strings.NewReader(s)), max)
	for range len(s) + 2 {
		g, gerr := got.Next()
		w, werr := want.Next()
		require.Equal(t, werr, gerr, "%q", s)
		if werr != nil {
			return
		}
		require.Equal(t, w.Name, g.Name, "%q", s)
		require.Equal(t, string(w.Data), string(g.Data), "%q", s)
	}
	t.Fatal("more events than bytes")
}

var byteReaders = []func(io.Reader) io.Reader{
	func(r io.Reader) io.Reader { return r },
	iotest.OneByteReader,
	iotest.HalfReader,
	iotest.DataErrReader,
}

func TestReaderAgreesWithReference(t *testing.T) {
	long := strings.Repeat("x", 40<<10) // longer than the reader's buffer
	for _, s := range []string{
		"data: " + long + "\n\n",
		"event: e\ndata: " + long + "\r\ndata: b\n\n",
		"data: a\n\ndata: " + long,
		": " + long + "\n\ndata: a\n\n",
		"event: a\ndata: 1\n\nevent: a\ndata: 2\n\ndata: 3\n\nevent: b\ndata: 4\n\n",
	} {
		for _, max := range []int{1 << 20, 40 << 10, 100} {
			for _, read := range byteReaders {
				sameEvents(t, s, max, read)
			}
		}
	}
}

func FuzzReaderAgreesWithReference(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "event: x\ndata: y\r\n\r\n", ": c\n\ndata:", "data: a\rdata: b\r\r", "\n\n\n", "data: [DONE]\n\n", "event: a\ndata: 1\n\nevent: a\ndata: 2\n\n"} {
		f.Add(s, uint16(1<<12))
	}
	f.Fuzz(func(t *testing.T, s string, max uint16) {
		for _, read := range byteReaders {
			sameEvents(t, s, int(max), read)
		}
	})
}

// A streamed chat answer's events, read as the reader did before
// (reference) and as it does now.
func BenchmarkReader(b *testing.B) {
	chunk := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}],"usage":null}`
	named := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word\"}}\n\n"
	for _, s := range []struct{ name, stream string }{
		{"chat", strings.Repeat("data: "+chunk+"\n\n", 20) + "data: [DONE]\n\n"},
		{"named", strings.Repeat(named, 20)},
	} {
		b.Run(s.name+"/reference", func(b *testing.B) {
			for b.Loop() {
				r := newRefReader(strings.NewReader(s.stream), 1<<20)
				for {
					if _, err := r.Next(); err != nil {
						break
					}
				}
			}
		})
		b.Run(s.name+"/reader", func(b *testing.B) {
			for b.Loop() {
				r := NewReader(strings.NewReader(s.stream), 1<<20)
				for {
					if _, err := r.Next(); err != nil {
						break
					}
				}
				r.Release()
			}
		})
	}
}
