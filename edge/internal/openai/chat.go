package openai

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/sse"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// KeepAliveEvery is how long a started stream may be silent before the edge
// sends an SSE comment, so proxies between it and the client keep the
// connection open.
const KeepAliveEvery = 15 * time.Second

// Chat serves POST /v1/chat/completions: a streamed answer is relayed event
// by event, flushed as it arrives, never buffered whole.
type Chat struct {
	Router corev1.RouterClient
	// Upstream records time core spent waiting upstream.
	Upstream func(r *http.Request, us int64)
	// KeepAliveEvery overrides the package's KeepAliveEvery when positive.
	KeepAliveEvery time.Duration
}

func (h *Chat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSON(w, r)
	if !ok {
		return
	}
	streamed, p := checkChat(body)
	if p != nil {
		p.Write(w)
		return
	}
	serveChat(w, r, h.Router, h.Upstream, h.KeepAliveEvery, chatDialect{
		req:    &corev1.ChatCompletionsRequest{Body: body, Headers: dialectHeaders(r, sessionHeaders)},
		whole:  !streamed,
		fail:   func(w http.ResponseWriter, err error) { FromError(err).Write(w) },
		events: chatEvents,
	})
}

// chatDialect is what a chat-path route adds to the shared call of core's
// ChatCompletions: the request, its error shape and its stream's end.
type chatDialect struct {
	req *corev1.ChatCompletionsRequest
	// whole: the body does not ask for a stream, so core is called with
	// CompleteChat (one call, no stream).
	whole bool
	// idHeaders are response headers naming the request besides
	// X-Request-Id.
	idHeaders []string
	// fail writes an error that came before the stream started, in the
	// route's shape.
	fail   func(w http.ResponseWriter, err error)
	events dialectEvents
}

// serveChat calls core's ChatCompletions for a checked body: a whole answer
// is written as it came, a streamed one relayed event by event.
func serveChat(w http.ResponseWriter, r *http.Request, router corev1.RouterClient, upstream func(r *http.Request, us int64), keepAlive time.Duration, d chatDialect) {
	ctx, id := Outgoing(r)
	ctx, cancel := context.WithCancel(ctx)
	// Leaving the handler (the client went away) cancels core's call, which
	// cancels the upstream's.
	defer cancel()
	w.Header().Set("X-Request-Id", id)
	for _, k := range d.idHeaders {
		w.Header().Set(k, id)
	}
	if d.whole {
		var md metadata.MD
		resp, err := router.CompleteChat(ctx, &corev1.CompleteChatRequest{Body: d.req.GetBody(), Dialect: d.req.GetDialect(), Headers: d.req.GetHeaders()}, grpc.Header(&md))
		switch {
		case err == nil:
			if us, ok := UpstreamMicros(md); ok && upstream != nil {
				upstream(r, us)
			}
			writeCompletion(w, resp.GetCompletion())
			return
		case !wholeRefused(err):
			d.fail(w, err)
			return
		}
		// Core reads the body as streamed after all, or predates
		// CompleteChat: no upstream was called, the stream call answers.
	}
	// Events the upstream sent together may come in one message.
	d.req.BatchEvents = true
	stream, err := router.ChatCompletions(ctx, d.req)
	if err != nil {
		d.fail(w, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		d.fail(w, err)
		return
	}
	if md, err := stream.Header(); err == nil && upstream != nil {
		if us, ok := UpstreamMicros(md); ok {
			upstream(r, us)
		}
	}
	if c, ok := first.GetEvent().(*corev1.ChatCompletionsResponse_Completion); ok {
		writeCompletion(w, c.Completion)
		return
	}
	if keepAlive <= 0 {
		keepAlive = KeepAliveEvery
	}
	er := &eventReader{stream: stream, m: new(corev1.ChatCompletionsResponse), inproc: readyOf(stream)}
	relay(w, r, keepAlive, d.events, er.take(first), er.next, er.ready)
}

// wholeRefused reports whether CompleteChat declined a request before
// calling any upstream: core reads it as streamed, or is older and does not
// know the call.
func wholeRefused(err error) bool {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unimplemented:
		return true
	case codes.InvalidArgument:
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == contract.ReasonStreamedRequest {
				return true
			}
		}
	}
	return false
}

// writeCompletion writes a whole answer.
func writeCompletion(w http.ResponseWriter, completion []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(completion)))
	_, _ = w.Write(completion)
}

// eventReader hands a stream's events to the relay one at a time,
// unpacking the ChatEvents in which core sends the events the upstream sent
// together. It receives every later response into one message: the relay
// copies an event's bytes (and seen reads them) before it asks for the
// next.
type eventReader struct {
	stream grpc.ServerStreamingClient[corev1.ChatCompletionsResponse]
	m      *corev1.ChatCompletionsResponse
	queue  []*corev1.ChatEvent
	inproc func() bool // the in-process stream's probe, or nil
}

// take returns m's (first) event, queueing the rest of a batch.
func (er *eventReader) take(m *corev1.ChatCompletionsResponse) event {
	if batch, ok := m.GetEvent().(*corev1.ChatCompletionsResponse_Events); ok {
		er.queue = batch.Events.GetEvents()
		return er.pop()
	}
	return event{m.GetEventName(), m.GetChunk()}
}

func (er *eventReader) pop() event {
	if len(er.queue) == 0 {
		return event{} // an empty batch, which core never sends
	}
	e := er.queue[0]
	er.queue = er.queue[1:]
	return event{e.GetName(), e.GetData()}
}

func (er *eventReader) next() (event, error) {
	for len(er.queue) == 0 {
		if err := er.stream.RecvMsg(er.m); err != nil {
			return event{}, err
		}
		if _, ok := er.m.GetEvent().(*corev1.ChatCompletionsResponse_Events); !ok {
			return event{er.m.GetEventName(), er.m.GetChunk()}, nil
		}
		er.queue = er.m.GetEvents().GetEvents()
	}
	return er.pop(), nil
}

// ready reports whether next has an event without waiting.
func (er *eventReader) ready() bool {
	return len(er.queue) > 0 || (er.inproc != nil && er.inproc())
}

// readyOf is the in-process stream's probe of a response already there
// (internal/inproc), or nil over a network connection.
func readyOf(stream grpc.ServerStreamingClient[corev1.ChatCompletionsResponse]) func() bool {
	if gs, ok := stream.(*grpc.GenericClientStream[corev1.ChatCompletionsRequest, corev1.ChatCompletionsResponse]); ok {
		if r, ok := gs.ClientStream.(interface{ Ready() bool }); ok {
			return r.Ready
		}
	}
	return nil
}

// event is one server-sent event: its name (none for Chat Completions) and
// its data.
type event struct {
	name string
	data []byte
}

// dialectEvents is how a dialect ends a stream: cleanly, or with its own
// in-band error after the first event (never a clean close).
type dialectEvents struct {
	// done is written after the last event of a whole answer.
	done []byte
	// seen, when set, is shown every event relayed (a dialect's in-band
	// error may name what the stream started).
	seen func(e event)
	// failure renders a mid-stream error.
	failure func(err error) []byte
}

// chatEvents ends Chat Completions streams: [DONE], or an error chunk the
// official SDKs raise.
var chatEvents = dialectEvents{
	done: sse.Done,
	failure: func(err error) []byte {
		p := FromError(err)
		b := p.Raw
		if b == nil {
			b, _ = marshalNoEscape(p.Body)
		}
		return sse.Data(bytes.TrimSpace(b))
	},
}

// writeEvent frames one event.
func writeEvent(e event) []byte {
	return appendEvent(make([]byte, 0, len(e.name)+len(e.data)+16), e)
}

// appendEvent frames one event onto b.
func appendEvent(b []byte, e event) []byte {
	if e.name != "" {
		b = append(b, "event: "...)
		b = append(b, e.name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, e.data...)
	return append(b, '\n', '\n')
}

// maxBatch bounds the bytes relay gathers before a flush.
const maxBatch = 64 << 10

// relay writes a server-sent event stream: first, then whatever next yields
// until io.EOF (the dialect's clean end) or an error (the dialect's in-band
// error, never a clean close), with a keep-alive comment after every
// keepAliveEvery of silence. It reads next in the handler's own goroutine
// (next must return when the request's context ends, as a gRPC stream's
// Recv does); the keep-alive is written from a timer, under the same lock.
// ready, when set, reports whether next would return at once: events
// already there are written with the one before and flushed together, so
// coalescing adds no latency (without ready, every event is flushed).
func relay(w http.ResponseWriter, r *http.Request, keepAliveEvery time.Duration, d dialectEvents, first event, next func() (event, error), ready func() bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	rl := &relayer{w: w, r: r, rc: *http.NewResponseController(w), d: d, every: keepAliveEvery, pooled: batches.Get().(*[]byte)}
	rl.buf = (*rl.pooled)[:0]
	defer rl.end()
	if d.seen != nil {
		d.seen(first)
	}
	rl.buf = appendEvent(rl.buf, first)
	// What came with the first event goes in its flush (no timer runs yet).
	more := true
	for more && ready != nil && len(rl.buf) < maxBatch && ready() {
		more = rl.add(next())
	}
	if !rl.send() || !more {
		return
	}
	rl.mu.Lock() // the timer's function runs once keepAlive is set
	rl.keepAlive = time.AfterFunc(keepAliveEvery, rl.keepAliveDue)
	rl.mu.Unlock()
	for {
		ev, err := next()
		rl.mu.Lock()
		more := rl.add(ev, err)
		// Take what is already there, then flush it all at once.
		for more && ready != nil && len(rl.buf) < maxBatch && ready() {
			ev, err = next()
			more = rl.add(ev, err)
		}
		ok := len(rl.buf) == 0 || rl.send()
		if ok && more {
			rl.keepAlive.Reset(keepAliveEvery)
		}
		rl.mu.Unlock()
		if !ok || !more {
			return
		}
	}
}

// relayer is one relayed stream.
type relayer struct {
	w     http.ResponseWriter
	r     *http.Request
	rc    http.ResponseController
	d     dialectEvents
	every time.Duration

	// mu guards w, buf and ended between the handler's goroutine and the
	// keep-alive timer's.
	mu        sync.Mutex
	buf       []byte  // the events of one flush, reused for the next
	pooled    *[]byte // where buf came from (batches)
	ended     bool    // relay returned: the timer writes nothing
	keepAlive *time.Timer
}

// send writes and flushes buf, and empties it.
func (rl *relayer) send() bool {
	_, err := rl.w.Write(rl.buf)
	rl.buf = rl.buf[:0]
	if cap(rl.buf) > maxBatch {
		rl.buf = nil // a huge event's buffer is not kept for the stream's life
	}
	if err != nil {
		return false
	}
	return rl.rc.Flush() == nil
}

// keepAliveDue writes a keep-alive comment after a silence.
func (rl *relayer) keepAliveDue() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.ended {
		return
	}
	rl.buf = append(rl.buf, sse.KeepAlive...)
	if rl.send() {
		rl.keepAlive.Reset(rl.every)
	}
	// A failed write: the client is gone, and next returns once the
	// request's context ends.
}

// end stops the timer and gives the buffer back (the timer's function,
// which may be waiting for the lock, then sees ended and writes nothing).
func (rl *relayer) end() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.ended = true
	if rl.keepAlive != nil {
		rl.keepAlive.Stop()
	}
	if b := rl.buf; b != nil && cap(b) <= maxBatch {
		*rl.pooled = b[:0]
		batches.Put(rl.pooled)
	}
	rl.buf, rl.pooled = nil, nil
}

// add queues one event's bytes, or the stream's end; false means the
// stream ended (its last bytes, if any, are queued).
func (rl *relayer) add(ev event, err error) bool {
	if err != nil {
		if errors.Is(err, io.EOF) {
			rl.buf = append(rl.buf, rl.d.done...)
			return false
		}
		if status.Code(err) == codes.Canceled && rl.r.Context().Err() != nil {
			return false // the client left
		}
		rl.buf = append(rl.buf, rl.d.failure(err)...)
		return false
	}
	if rl.d.seen != nil {
		rl.d.seen(ev)
	}
	rl.buf = appendEvent(rl.buf, ev)
	return true
}

// batches are relay buffers between streams. A buffer is handed out empty
// and only ever written from its length on, so no stream's bytes reach
// another's answer; one grown past maxBatch is not kept.
var batches = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}
