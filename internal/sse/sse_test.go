package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readAll(t *testing.T, s string) ([]Event, error) {
	t.Helper()
	r := NewReader(strings.NewReader(s), 1<<20)
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, Event{Name: ev.Name, Data: append([]byte(nil), ev.Data...)})
	}
}

func TestReader(t *testing.T) {
	evs, err := readAll(t, "data: {\"a\":1}\n\n: keep-alive\n\nevent: message_start\ndata: {\"b\":2}\n\ndata: line1\ndata: line2\r\n\r\ndata:[DONE]\n\n")
	require.NoError(t, err)
	require.Len(t, evs, 4)
	assert.Equal(t, `{"a":1}`, string(evs[0].Data))
	assert.Equal(t, "message_start", evs[1].Name)
	assert.Equal(t, "line1\nline2", string(evs[2].Data))
	assert.Equal(t, "[DONE]", string(evs[3].Data))
	assert.Empty(t, evs[3].Name, "the event name does not carry over")
}

func TestReaderTruncation(t *testing.T) {
	_, err := readAll(t, "data: {\"a\":1}\n\ndata: {\"a\":")
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "a cut inside an event is not a clean end")
	_, err = readAll(t, "data: {\"a\":1}\n\ndata: {}\n")
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	evs, err := readAll(t, "data: x\n\n")
	require.NoError(t, err)
	assert.Len(t, evs, 1)
}

// A stream that stops right after OpenAI's [DONE], without the blank line
// or even the line's end, ended cleanly; anything else cut there did not.
func TestReaderDoneAtTheVeryEnd(t *testing.T) {
	for _, tail := range []string{"data: [DONE]\n", "data: [DONE]", "data:[DONE]", "data: [DONE]\r\n"} {
		evs, err := readAll(t, "data: {\"a\":1}\n\n"+tail)
		require.NoError(t, err, "%q", tail)
		require.Len(t, evs, 2, "%q", tail)
		assert.Equal(t, "[DONE]", string(evs[1].Data), "%q", tail)
	}
	for _, tail := range []string{"data: [DON", "data: [DONE]x\n", "data: {}\ndata: [DONE]\n"} {
		_, err := readAll(t, "data: {\"a\":1}\n\n"+tail)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "%q", tail)
	}
}

func TestReaderLimit(t *testing.T) {
	r := NewReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 10)
	_, err := r.Next()
	assert.ErrorIs(t, err, ErrTooLarge)
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "event: x\ndata: y\r\n\r\n", ": c\n\ndata:", "data: a\rdata: b\r\r", "\n\n\n", "data: [DONE]\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := NewReader(strings.NewReader(s), 1<<12)
		for range len(s) + 2 {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 1<<12 {
				t.Fatal("event over the limit")
			}
		}
		t.Fatal("more events than bytes")
	})
}

// TestReaderReady: Ready is true exactly when the next event Next would
// return is already whole in the buffer.
func TestReaderReady(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		ready  bool
	}{
		{"nothing yet", "", false},
		{"a whole event", "data: {}\n\n", true},
		{"a whole event, CRLF", "data: {}\r\n\r\n", true},
		{"a named event", "event: x\ndata: {}\n\n", true},
		{"a bare data line", "data\n\n", true},
		{"an event without its blank line", "data: {}\n", false},
		{"half a line", "data: {", false},
		{"a keep-alive comment only", ": ping\n\n", false},
		{"a comment, then half an event", ": ping\n\ndata: {", false},
		{"a comment, then a whole event", ": ping\n\ndata: {}\n\n", true},
		{"an event without data", "event: x\n\n", false},
		{"a field that only starts with data", "dataset: 1\n\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			r := NewReader(pr, 1<<10)
			go func() {
				_, _ = pw.Write([]byte("data: first\n\n" + tc.stream))
			}()
			ev, err := r.Next()
			if err != nil || string(ev.Data) != "first" {
				t.Fatalf("first event: %q %v", ev.Data, err)
			}
			if got := r.Ready(); got != tc.ready {
				t.Fatalf("Ready() = %v after %q, want %v", got, tc.stream, tc.ready)
			}
			pw.Close()
		})
	}
}

// A released reader reads the next stream as a new one: nothing of the
// event it was cut in, its name or its limit carries over.
func TestReaderReleasedStartsClean(t *testing.T) {
	for range 3 {
		r := NewReader(strings.NewReader("event: x\ndata: a\n\nevent: y\ndata: "+strings.Repeat("b", 70<<10)), 1<<20)
		ev, err := r.Next()
		require.NoError(t, err)
		assert.Equal(t, "x", ev.Name)
		_, err = r.Next()
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		r.Release()

		r = NewReader(strings.NewReader("data: c\n\nevent: z\ndata: d"), 1<<20)
		ev, err = r.Next()
		require.NoError(t, err)
		assert.Empty(t, ev.Name)
		assert.Equal(t, "c", string(ev.Data))
		_, err = r.Next()
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		r.Release()

		r = NewReader(strings.NewReader("data: "+strings.Repeat("e", 20)+"\n\n"), 10)
		_, err = r.Next()
		require.ErrorIs(t, err, ErrTooLarge, "the limit is the new reader's")
		r.Release()
	}
}

// A reader released twice goes back once: two streams never share it.
func TestReaderReleasedTwiceIsNotShared(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\n"), 1<<10)
	r.Release()
	r.Release()
	a := NewReader(strings.NewReader("data: a\n\n"), 1<<10)
	b := NewReader(strings.NewReader("data: b\n\n"), 1<<10)
	require.NotSame(t, a, b)
}

// A comment is no event, but the reader reports it as it arrives, while
// Next still waits for the next event: a watchdog on the stream's silence
// sees a server that says it is alive (OpenRouter's keep-alives while its
// model thinks) in time. A reader handed back forgets the hook.
func TestReaderReportsCommentsAsTheyArrive(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 1<<20)
	comments := make(chan struct{}, 10)
	r.OnComment(func() { comments <- struct{}{} })
	type next struct {
		ev  Event
		err error
	}
	got := make(chan next, 1)
	go func() {
		ev, err := r.Next()
		got <- next{Event{Name: ev.Name, Data: append([]byte(nil), ev.Data...)}, err}
	}()
	for range 3 {
		_, err := io.WriteString(pw, ": OPENROUTER PROCESSING\n\n")
		require.NoError(t, err)
		select {
		case <-comments:
		case <-time.After(5 * time.Second):
			t.Fatal("a comment that arrived was not reported")
		}
	}
	select {
	case n := <-got:
		t.Fatalf("Next returned on a comment: %+v", n)
	default:
	}
	_, err := io.WriteString(pw, "data: {\"a\":1}\n: between the lines\ndata: {\"b\":2}\n\n")
	require.NoError(t, err)
	n := <-got
	require.NoError(t, n.err)
	assert.Equal(t, "{\"a\":1}\n{\"b\":2}", string(n.ev.Data), "a comment inside an event is not its data")
	assert.Len(t, comments, 1, "the comment inside the event was reported")
	require.NoError(t, pw.Close())

	r.Release()
	again := NewReader(strings.NewReader(": ping\n\ndata: x\n\n"), 1<<20)
	defer again.Release()
	_, err = again.Next()
	require.NoError(t, err)
	assert.Len(t, comments, 1, "a reused reader does not call the last stream's hook")
}
