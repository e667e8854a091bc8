package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// batchRecorder is a BatchSink that records each message it was handed
// (the events of one Events call, or one Chunk), and can fail from a given
// message on.
type batchRecorder struct {
	mu       sync.Mutex
	messages [][]string // each message's events' data
	failFrom int        // 0: never
	got      chan struct{}
}

func newBatchRecorder() *batchRecorder { return &batchRecorder{got: make(chan struct{}, 100)} }

func (r *batchRecorder) Start(time.Duration) error { return nil }
func (r *batchRecorder) Completion([]byte) error   { return errors.New("not a stream") }
func (r *batchRecorder) Chunk(event string, data []byte) error {
	return r.Events([]Event{{Name: event, Data: data}})
}

func (r *batchRecorder) Events(evs []Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failFrom > 0 && len(r.messages)+1 >= r.failFrom {
		return errors.New("client gone")
	}
	var m []string
	for _, ev := range evs {
		m = append(m, string(ev.Data)) // copied: the caller may reuse Data
	}
	r.messages = append(r.messages, m)
	r.got <- struct{}{}
	return nil
}

func (r *batchRecorder) snapshot() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.messages...)
}

func chunk(text string) string {
	return fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q}}]}`, text)
}

const finish = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

func sseOf(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		b.WriteString("data: " + d + "\n\n")
	}
	return b.String()
}

// streamTo runs one streamed attempt of an OpenAI chat answer read from r
// into sink.
func streamTo(t *testing.T, sink Sink, r io.Reader) (Usage, *attempt, error) {
	t.Helper()
	return streamAs(t, DialectChat, provider.Spec{}, sink, r)
}

// streamAs runs one streamed attempt of a client of dialect d, with an
// upstream of spec's format whose stream is read from r, into sink.
func streamAs(t *testing.T, d Dialect, spec provider.Spec, sink Sink, r io.Reader) (Usage, *attempt, error) {
	t.Helper()
	return streamWithin(t, time.Minute, time.Minute, d, spec, sink, r)
}

// streamWithin is streamAs with the watchdog's first event and stall
// timeouts. A reader that can be closed with an error (an io.PipeReader)
// is closed with the watchdog's cause when it fires, as an upstream call's
// body is.
func streamWithin(t *testing.T, first, stall time.Duration, d Dialect, spec provider.Spec, sink Sink, r io.Reader) (Usage, *attempt, error) {
	t.Helper()
	svc := &Service{opts: Options{StallTimeout: stall, FirstEventTimeout: first}}
	cp := &completion{s: svc, sink: sink, start: time.Now()}
	a := &attempt{
		svc: svc, in: inbound{dialect: d, stream: true}, tr: pick(d, spec, "m"),
		t: routing.Target{Model: "m"}, c: &dispatch.Conn{Connection: &busv1.Connection{Id: "conn"}}, sink: sink, cp: cp,
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if c, ok := r.(interface{ CloseWithError(error) error }); ok {
		stop := context.AfterFunc(ctx, func() { _ = c.CloseWithError(context.Cause(ctx)) })
		defer stop()
	}
	u, err := a.stream(ctx, cancel, r)
	return u, a, err
}

// Events that arrive together from the upstream leave in one message, in
// order; the end of the stream ([DONE]) is not an event.
func TestStreamEventsThatArriveTogetherLeaveTogether(t *testing.T) {
	sink := newBatchRecorder()
	body := sseOf(chunk("a"), chunk("b"), chunk("c"), finish, "[DONE]")
	_, a, err := streamTo(t, sink, strings.NewReader(body))
	require.NoError(t, err)
	assert.Equal(t, [][]string{{chunk("a"), chunk("b"), chunk("c"), finish}}, sink.snapshot())
	assert.EqualValues(t, 3, a.delivered.chars, "the delivered text was counted once it left")
}

// An event is never held waiting for one that has not arrived: what is
// there goes before the attempt waits on the upstream.
func TestStreamEventsAreNotHeldForLaterOnes(t *testing.T) {
	sink := newBatchRecorder()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, _, err := streamTo(t, sink, pr)
		done <- err
	}()
	write := func(s string) {
		_, err := pw.Write([]byte(s))
		require.NoError(t, err)
	}
	write(sseOf(chunk("a"), chunk("b")))
	<-sink.got // both sent before the upstream sends more
	assert.Equal(t, [][]string{{chunk("a"), chunk("b")}}, sink.snapshot())
	write(sseOf(chunk("c")) + "data: " + chunk("d")[:10]) // c whole, d half
	<-sink.got
	assert.Equal(t, [][]string{{chunk("a"), chunk("b")}, {chunk("c")}}, sink.snapshot(), "c is not held for d")
	write(chunk("d")[10:] + "\n\n" + sseOf(finish, "[DONE]"))
	require.NoError(t, pw.Close())
	require.NoError(t, <-done)
	assert.Equal(t, [][]string{{chunk("a"), chunk("b")}, {chunk("c")}, {chunk("d"), finish}}, sink.snapshot())
}

// A batch the client did not take is not billed as delivered, and the
// attempt ends committed (no other connection may answer now).
func TestStreamBatchNotTakenIsNotDelivered(t *testing.T) {
	sink := newBatchRecorder()
	sink.failFrom = 2
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var a *attempt
	go func() {
		var err error
		_, a, err = streamTo(t, sink, pr)
		done <- err
	}()
	_, err := pw.Write([]byte(sseOf(chunk("hello"))))
	require.NoError(t, err)
	<-sink.got
	go func() { _, _ = pw.Write([]byte(sseOf(chunk("world"), chunk("again")))) }()
	err = <-done
	require.Error(t, err)
	assert.True(t, credential.IsCommitted(err), "%v", err)
	assert.EqualValues(t, len("hello"), a.delivered.chars, "only what the client took")
	pw.Close()
}

// A stream that breaks after events it held sends them before its error.
func TestStreamHeldEventsGoBeforeTheError(t *testing.T) {
	sink := newBatchRecorder()
	body := sseOf(chunk("a"), chunk("b")) + "data: {not json\n\n"
	_, _, err := streamTo(t, sink, strings.NewReader(body))
	require.Error(t, err)
	assert.True(t, credential.IsCommitted(err), "%v", err)
	assert.Equal(t, [][]string{{chunk("a"), chunk("b")}}, sink.snapshot())
}
