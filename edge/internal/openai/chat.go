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
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/inproc"
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
			d.fail(w, shutdownOr(r, err))
			return
		}
		// Core reads the body as streamed after all, or predates
		// CompleteChat: no upstream was called, the stream call answers.
	}
	// Events the upstream sent together may come in one message.
	d.req.BatchEvents = true
	if keepAlive <= 0 {
		keepAlive = KeepAliveEvery
	}
	sw := &streamWriter{w: w, r: r, every: keepAlive, d: d, upstream: upstream}
	// In one process core's handler runs within the first Recv, on this
	// goroutine, and hands each message to sw as it sends it
	// (inproc.Deliver); over a network Recv returns them one by one.
	var stream grpc.ServerStreamingClient[corev1.ChatCompletionsResponse]
	stream, err := router.ChatCompletions(ctx, d.req, inproc.Deliver(func(m proto.Message) error {
		return sw.take(m.(*corev1.ChatCompletionsResponse), stream)
	}))
	if err != nil {
		d.fail(w, shutdownOr(r, err))
		return
	}
	sw.from(stream)
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

// streamWriter writes core's answer to one request as its messages come:
// the first one decides between a whole answer and an event stream, whose
// messages (one event, or the events the upstream sent together) are each
// written and flushed at once.
type streamWriter struct {
	w        http.ResponseWriter
	r        *http.Request
	every    time.Duration
	d        chatDialect
	upstream func(r *http.Request, us int64)

	rl    *relayer // the event stream, once its first message came
	whole bool     // a whole answer was written
	gone  bool     // a write to the client failed
}

// from reads stream to its end, each message to take (in one process the
// first Recv has already delivered them all and returns the end).
func (sw *streamWriter) from(stream grpc.ServerStreamingClient[corev1.ChatCompletionsResponse]) {
	for {
		m, err := stream.Recv()
		if err != nil {
			sw.end(err)
			return
		}
		if sw.take(m, stream) != nil {
			sw.end(nil)
			return // leaving cancels core's call
		}
	}
}

// errClientGone is take's answer once a write to the client failed.
var errClientGone = errors.New("the client went away")

// take writes one message of core's stream; an error means the client is
// gone.
func (sw *streamWriter) take(m *corev1.ChatCompletionsResponse, stream grpc.ClientStream) error {
	if sw.whole {
		return nil // core sends nothing after a whole answer
	}
	if sw.rl == nil {
		if sw.upstream != nil && stream != nil {
			if md, err := stream.Header(); err == nil {
				if us, ok := UpstreamMicros(md); ok {
					sw.upstream(sw.r, us)
				}
			}
		}
		if c, ok := m.GetEvent().(*corev1.ChatCompletionsResponse_Completion); ok {
			writeCompletion(sw.w, c.Completion)
			sw.whole = true
			return nil
		}
		sw.rl = startRelay(sw.w, sw.r, sw.every, sw.d.events)
	}
	if err := sw.rl.write(m); err != nil {
		sw.gone = true
		return err
	}
	return nil
}

// end finishes the answer with the stream's end (nil: the client left):
// an error before any event in the route's shape, else the dialect's end
// of the event stream.
func (sw *streamWriter) end(err error) {
	switch {
	case sw.whole:
	case sw.rl != nil && sw.gone:
		sw.rl.close(nil)
	case sw.rl != nil:
		sw.rl.close(err)
	case err != nil:
		sw.d.fail(sw.w, shutdownOr(sw.r, err))
	}
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
	return sse.AppendEvent(make([]byte, 0, len(e.name)+len(e.data)+16), e.name, e.data)
}

// maxBatch bounds the size of a relay buffer kept for the next flush.
const maxBatch = 64 << 10

// startRelay starts a server-sent event stream on w: each write sends one
// message's events and flushes them, close ends it (the dialect's clean
// end, or its in-band error, never a clean close after an error), and a
// keep-alive comment goes out after every keepAliveEvery of silence, from a
// timer, under the same lock.
func startRelay(w http.ResponseWriter, r *http.Request, keepAliveEvery time.Duration, d dialectEvents) *relayer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	rl := &relayer{w: w, r: r, rc: *http.NewResponseController(w), d: d, every: keepAliveEvery, pooled: batches.Get().(*[]byte)}
	rl.buf = (*rl.pooled)[:0]
	return rl
}

// relayer is one relayed stream.
type relayer struct {
	w     http.ResponseWriter
	r     *http.Request
	rc    http.ResponseController
	d     dialectEvents
	every time.Duration

	// mu guards w, buf and ended between the writer and the keep-alive
	// timer's goroutine.
	mu        sync.Mutex
	buf       []byte  // the events of one flush, reused for the next
	pooled    *[]byte // where buf came from (batches)
	ended     bool    // close was called: the timer writes nothing
	keepAlive *time.Timer
}

// write sends the events of one message of core's stream (one event, or a
// batch) in one flush; an error means the client is gone.
func (rl *relayer) write(m *corev1.ChatCompletionsResponse) error {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if batch, ok := m.GetEvent().(*corev1.ChatCompletionsResponse_Events); ok {
		for _, e := range batch.Events.GetEvents() {
			rl.add(event{e.GetName(), e.GetData()})
		}
	} else {
		rl.add(event{m.GetEventName(), m.GetChunk()})
	}
	return rl.sendAndWait()
}

// writeRaw sends events already framed (a streamed transcription's, as
// core relays them) in one flush, as write does; an error means the client
// is gone.
func (rl *relayer) writeRaw(b []byte) error {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.buf = append(rl.buf, b...)
	return rl.sendAndWait()
}

// sendAndWait sends what is queued and arms the keep-alive for the next
// silence; an error means the client is gone. Called with mu held.
func (rl *relayer) sendAndWait() error {
	if !rl.send() {
		return errClientGone
	}
	if rl.keepAlive == nil {
		rl.keepAlive = time.AfterFunc(rl.every, rl.keepAliveDue)
	} else {
		rl.keepAlive.Reset(rl.every)
	}
	return nil
}

// add queues one event's bytes.
func (rl *relayer) add(ev event) {
	if rl.d.seen != nil {
		rl.d.seen(ev)
	}
	rl.buf = sse.AppendEvent(rl.buf, ev.name, ev.data)
}

// close ends the stream with its end (the handler's last write): io.EOF is
// the dialect's clean end,
// another error its in-band error (the edge's shutdown ending the stream
// included), nil (or a cancellation once the client left) nothing. It stops
// the timer and gives the buffer back (the timer's function, which may be
// waiting for the lock, then sees ended and writes nothing).
func (rl *relayer) close(err error) {
	err = shutdownOr(rl.r, err)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		rl.buf = append(rl.buf, rl.d.done...)
	case status.Code(err) == codes.Canceled && rl.r.Context().Err() != nil:
		// the client left
	default:
		rl.buf = append(rl.buf, rl.d.failure(err)...)
	}
	if len(rl.buf) > 0 {
		// Not flushed: the handler returns now, and the server flushes
		// these last bytes with the response's end in one write.
		_, _ = rl.w.Write(rl.buf)
	}
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
	// A failed write: the client is gone, and core's call ends with the
	// request's context.
}

// batches are relay buffers between streams. A buffer is handed out empty
// and only ever written from its length on, so no stream's bytes reach
// another's answer; one grown past maxBatch is not kept.
var batches = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}
