package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/core/internal/translate"
	"github.com/switchboardhq/switchboard/internal/sse"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// attempt is one upstream call with one connection. It knows nothing of
// dialects or formats: the translator does.
type attempt struct {
	svc   *Service
	in    inbound
	tr    translator
	t     routing.Target
	c     *dispatch.Conn
	sink  Sink
	cp    *completion // begins the answer
	level string
	sent  bool // a chunk reached the sink: no fallback from here on
	// refusalKey names the connection and model in the service's
	// reasoningRefusals when reasoning may go back to the upstream;
	// withheld: it does not, the upstream having refused it lately.
	refusalKey string
	withheld   bool
	// delivered counts what reached the client, billed if the stream ends
	// early.
	delivered delivered
	// held are events of a stream waiting to go to a BatchSink together,
	// their data copied into heldData (the reader reuses its buffer).
	held     []heldEvent
	heldData []byte
	// watchdog cancels a stream's call when its upstream stays silent too
	// long (silence); alive: the upstream sent an event or a comment.
	watchdog *time.Timer
	alive    bool
}

// heldEvent is an event held for a batch: its data is heldData[start:end],
// chars its delivered text.
type heldEvent struct {
	name       string
	start, end int
	chars      int64
}

// maxHeld bounds the data of the events held for one batch.
const maxHeld = 32 << 10

// heldBuffers recycles the held events' data between streams (a
// BatchSink does not keep the data it was handed).
var heldBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// hold keeps an event for the next batch, sending the batch when it is
// full.
func (a *attempt) hold(b BatchSink, event string, data []byte, chars int64) error {
	if a.heldData == nil {
		a.heldData = (*heldBuffers.Get().(*[]byte))[:0]
		a.held = make([]heldEvent, 0, 8)
	}
	start := len(a.heldData)
	a.heldData = append(a.heldData, data...)
	a.held = append(a.held, heldEvent{name: event, start: start, end: len(a.heldData), chars: chars})
	if len(a.heldData) >= maxHeld {
		return a.release(b)
	}
	return nil
}

// release sends the held events in one message; they count as delivered
// once the sink took them.
func (a *attempt) release(b BatchSink) error {
	if len(a.held) == 0 {
		return nil
	}
	evs := make([]Event, len(a.held))
	var chars int64
	for i, h := range a.held {
		evs[i] = Event{Name: h.name, Data: a.heldData[h.start:h.end:h.end]}
		chars += h.chars
	}
	a.held, a.heldData = a.held[:0], a.heldData[:0]
	if err := b.Events(evs); err != nil {
		return err
	}
	a.delivered.chars += chars
	return nil
}

// body builds the upstream request body in the target's shape, with the
// terse prompt injected last.
func (a *attempt) body() ([]byte, error) {
	body, err := a.tr.request(a.in, a.t.Model)
	if err != nil {
		return nil, err
	}
	if a.level != "" {
		// A body the injector cannot read goes upstream as it is: the
		// upstream is the judge of the request's shape.
		if terse, err := a.tr.inject(body, a.level); err == nil {
			return terse, nil
		}
	}
	return body, nil
}

func (a *attempt) run(ctx context.Context) (Usage, error) {
	body, err := a.body()
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			// The request's own fault, found in translation: a 400 that is
			// passed through like an upstream's, with no fallback.
			return Usage{}, &credential.UpstreamError{Status: http.StatusBadRequest, Body: re.body()}
		}
		return Usage{}, err
	}
	// An upstream that only streams gets a non-streamed request streamed,
	// and its stream is assembled into the whole answer.
	asm, canAssemble := a.tr.(assembler)
	assembled := !a.in.stream && a.c.Spec.StreamOnly && canAssemble
	if body, err = fitBody(body, a.c.Spec, assembled); err != nil {
		return Usage{}, err
	}
	// A watchdog cancels the call when the upstream goes silent after its
	// headers: the stream's (see events), or a body read whole's (see
	// stallReader). A stream's attempt works under the call's context; a
	// whole answer's keeps the attempt's, which a watchdog firing once the
	// body is read must not end.
	call, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if a.in.stream || assembled {
		ctx = call
	}
	reqCtx := call
	if !a.in.stream && !assembled {
		// The upstream sends its headers only once the answer is written.
		reqCtx = upstream.WholeAnswer(call)
	}
	resp, err := a.send(reqCtx, body, a.in.stream || assembled)
	if err != nil {
		return Usage{}, err
	}
	if resp.StatusCode >= 300 {
		raw := a.refusal(resp, cancel)
		fitted, ok := a.refit(resp.StatusCode, body, raw)
		// What was refused was the reasoning (the only thing an
		// OpenAI-shaped upstream's refit takes out).
		dropped := ok && a.refusalKey != ""
		if a.withheld && (resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity) {
			// Refused without the reasoning: the next request sends it
			// again, for a server that now wants it back; this one too,
			// when the server says it wants it (DeepSeek).
			a.svc.refusals.forget(a.refusalKey)
			if translate.ReasoningWanted(raw) {
				fitted, ok = a.withReasoning(assembled)
			}
		}
		if !ok || call.Err() != nil {
			return Usage{}, a.upstreamError(resp, raw)
		}
		// The upstream refused what the gateway added (its own max_tokens
		// past the model's context window: a long conversation, with a
		// stream's cap of the model's whole output limit; reasoning sent
		// back to a server that takes none): asked again, once and on
		// this connection, without it; or what it withheld (the reasoning
		// of a connection remembered as refusing it, from a server that
		// wants it): asked again with it. The refusal is no failure of the
		// connection's: no fallback, no cooling, nothing billed.
		if resp, err = a.send(reqCtx, fitted, a.in.stream || assembled); err != nil {
			return Usage{}, err
		}
		if resp.StatusCode >= 300 {
			return Usage{}, a.upstreamError(resp, a.refusal(resp, cancel))
		}
		if dropped {
			// The connection's next requests for the model go without
			// the reasoning.
			a.svc.refusals.remember(a.refusalKey, time.Now())
		}
	}
	defer resp.Body.Close()
	if assembled {
		// The stream's watchdogs apply: nothing reached the client yet, so
		// a silent upstream gives way to the next connection. The first
		// event timeout holds until the upstream's first event, the stall
		// timeout after; a keep-alive comment is life but no event (see
		// events), so it arms the watchdog again with the one that holds.
		watchdog := time.AfterFunc(a.svc.opts.FirstEventTimeout, func() { cancel(errFirstEvent) })
		defer watchdog.Stop()
		wait := a.svc.opts.FirstEventTimeout
		raw, err := asm.assemble(io.LimitReader(resp.Body, maxBody), requestStops(a.in),
			func() { wait = a.svc.opts.StallTimeout; watchdog.Reset(wait) },
			func() { watchdog.Reset(wait) })
		if err != nil {
			if errors.Is(context.Cause(ctx), errFirstEvent) {
				return Usage{}, badUpstream("the upstream stream stalled")
			}
			if errors.Is(err, errUpstreamEvent) {
				return Usage{}, a.failEvent(err)
			}
			return Usage{}, err
		}
		return a.wholeRaw(ctx, raw)
	}
	if !a.in.stream {
		sr := a.stallReader(resp.Body, cancel)
		raw, err := readBody(sr, resp.ContentLength)
		sr.Stop()
		if err != nil {
			return Usage{}, sr.Err(call, err)
		}
		return a.wholeRaw(ctx, raw)
	}
	return a.stream(ctx, cancel, resp.Body)
}

// withReasoning is the request built again with the reasoning sent back,
// for an upstream that refused it withheld: the target's own translator.
func (a *attempt) withReasoning(assembled bool) ([]byte, bool) {
	a.tr, a.withheld = pick(a.in.dialect, a.t.Spec, a.t.Model), false
	body, err := a.body()
	if err != nil {
		return nil, false
	}
	if body, err = fitBody(body, a.c.Spec, assembled); err != nil {
		return nil, false
	}
	return body, true
}

// send posts body to the upstream; stream asks for a stream.
func (a *attempt) send(ctx context.Context, body []byte, stream bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.c.BaseURL+a.tr.path(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	a.tr.header(req.Header, a.in)
	a.c.Authorize(req.Header)
	return a.c.Client.Do(req)
}

// refusal reads and closes an error answer's body, scrubbed of the
// credential: what it brought before a stall is what there is.
func (a *attempt) refusal(resp *http.Response, cancel context.CancelCauseFunc) []byte {
	defer resp.Body.Close()
	sr := a.stallReader(resp.Body, cancel)
	raw, _ := io.ReadAll(io.LimitReader(sr, upstream.MaxErrorBody))
	sr.Stop()
	return a.c.Scrub(raw)
}

// refit is body asked again without what the gateway added, when the
// upstream refused it (status, raw) for that (refitter).
func (a *attempt) refit(status int, body, raw []byte) ([]byte, bool) {
	// Mistral and other strict schemas refuse a member they do not know
	// with a 422.
	rf, ok := a.tr.(refitter)
	if !ok || status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
		return nil, false
	}
	return rf.refit(a.in, body, raw)
}

// upstreamError is an error answer as the client's route passes it
// through.
func (a *attempt) upstreamError(resp *http.Response, raw []byte) error {
	return &credential.UpstreamError{Status: resp.StatusCode, Header: resp.Header, Body: a.tr.errorBody(raw)}
}

func (a *attempt) stallReader(r io.Reader, cancel context.CancelCauseFunc) *upstream.StallReader {
	return upstream.NewStallReader(r, a.svc.opts.FirstEventTimeout, a.svc.opts.StallTimeout, cancel)
}

// begin starts the answer with this attempt's connection.
func (a *attempt) begin(ctx context.Context) error {
	return a.cp.begin(ctx, a.c.Connection.GetId())
}

// badUpstream is an upstream answer the gateway cannot relay: the next
// connection gets the request.
func badUpstream(msg string) error {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "api_error", "code": "bad_upstream_response"}})
	return &credential.UpstreamError{Status: http.StatusBadGateway, Body: b}
}

// readBody reads at most maxBody bytes of r, io.ReadAll's way, into a
// buffer sized for the announced size: one allocation instead of a series
// of growing ones.
func readBody(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size >= maxBody {
		return io.ReadAll(io.LimitReader(r, maxBody))
	}
	lr := io.LimitedReader{R: r, N: maxBody}
	// One byte more than announced, so the read that finds the end needs
	// no growth.
	b := make([]byte, 0, size+1)
	for {
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// wholeRaw relays a non-streamed answer's body.
func (a *attempt) wholeRaw(ctx context.Context, raw []byte) (Usage, error) {
	out, u, err := a.tr.whole(a.in, raw, a.t.Model)
	if err != nil {
		var up *credential.UpstreamError
		if errors.As(err, &up) {
			// An error the answer held (a 200 with an error object) may echo
			// the credential, as an error answer may: scrubbed alike.
			up.Body = a.c.Scrub(up.Body)
		}
		return Usage{}, err
	}
	if err := a.begin(ctx); err != nil {
		return Usage{}, credential.Committed(err)
	}
	if err := a.sink.Completion(out); err != nil {
		return Usage{}, credential.Committed(err)
	}
	return billedWhole(a.in, out, u), nil
}

// stream relays a streamed answer event by event.
//
// With a BatchSink, the events that the upstream sent together (whole in
// the reader's buffer) leave together: they are held while the next event
// is already there, and released before the attempt waits on the upstream,
// when they grow past maxHeld, and at the stream's end or failure (before
// its error, so that the client sees them first).
func (a *attempt) stream(ctx context.Context, cancel context.CancelCauseFunc, r io.Reader) (Usage, error) {
	b, _ := a.sink.(BatchSink)
	rd := sse.NewReader(r, maxEvent)
	defer rd.Release() // the events went to the sink, or were copied to be held
	u, err := a.events(ctx, cancel, rd, b)
	if b != nil {
		if rerr := a.release(b); rerr != nil && err == nil {
			err = credential.Committed(rerr)
		}
		if a.heldData != nil && cap(a.heldData) <= maxHeld*2 {
			buf := a.heldData[:0]
			heldBuffers.Put(&buf)
		}
		a.heldData = nil
	}
	if err == nil {
		// Ended whole: billed as a whole answer is, once every event
		// counted as delivered.
		u = billedStream(a.in, a.delivered, u)
	}
	return u, err
}

// events relays the stream's events as they come (see stream).
func (a *attempt) events(ctx context.Context, cancel context.CancelCauseFunc, rd *sse.Reader, b BatchSink) (Usage, error) {
	// The watchdog times the upstream's silence: the first event timeout
	// until something reached the client, the stall timeout after (see
	// silence). Each sign of life arms it again: an event, and a keep-alive
	// comment (see comment).
	a.watchdog = time.AfterFunc(a.svc.opts.FirstEventTimeout, func() { cancel(errFirstEvent) })
	defer a.watchdog.Stop()
	rd.OnComment(a.comment)
	et := a.tr.events(a.in, a.t.Model)
	ctr, _ := et.(counter)
	var sinkErr error
	emit := func(event string, data []byte) error {
		chars, ok := int64(0), false
		if ctr != nil {
			chars, ok = ctr.counted(event, data)
		}
		if !ok {
			chars = deliveredChars(event, data)
		}
		if !a.sent {
			if err := a.begin(ctx); err != nil {
				sinkErr = err
				return err
			}
			a.sent = true
		}
		if b != nil {
			if err := a.hold(b, event, data, chars); err != nil {
				sinkErr = err
				return err
			}
			return nil
		}
		if err := a.sink.Chunk(event, data); err != nil {
			sinkErr = err
			return err
		}
		a.delivered.chars += chars
		return nil
	}
	// ended reads the upstream's end: a whole answer is closed, a cut one
	// ends with an error.
	ended := func() (Usage, error) {
		complete, err := et.finish(emit)
		if sinkErr != nil {
			return et.usage(), credential.Committed(sinkErr)
		}
		if err != nil {
			return et.usage(), a.fail("upstream_error", err.Error())
		}
		if !complete {
			return et.usage(), a.fail("stream_interrupted", "the upstream ended the stream before it finished")
		}
		return et.usage(), nil
	}
	for {
		if b != nil && !rd.Ready() {
			// Nothing more is here: what is held goes before the wait.
			if err := a.release(b); err != nil {
				return et.usage(), credential.Committed(err)
			}
		}
		// Armed after the last event was relayed, so that the silence it
		// waits for is the one that holds now.
		a.watchdog.Reset(a.silence())
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ended()
			}
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errFirstEvent) && a.sent:
				return et.usage(), a.fail("stream_stalled", fmt.Sprintf("the upstream stream stalled for %s", a.svc.opts.StallTimeout))
			case errors.Is(cause, errFirstEvent) && a.alive:
				return et.usage(), a.fail("stream_stalled", fmt.Sprintf("the upstream went silent for %s before its answer began", a.svc.opts.FirstEventTimeout))
			case errors.Is(cause, errFirstEvent):
				return et.usage(), a.fail("stream_stalled", fmt.Sprintf("the upstream sent nothing for %s", a.svc.opts.FirstEventTimeout))
			case ctx.Err() != nil:
				return et.usage(), ctx.Err()
			}
			return et.usage(), a.fail("stream_interrupted", "the upstream stream broke off")
		}
		a.alive = true
		end, err := et.event(ev.Name, ev.Data, emit)
		switch {
		case sinkErr != nil:
			return et.usage(), credential.Committed(sinkErr)
		case errors.Is(err, errMalformedEvent):
			return et.usage(), a.fail("stream_malformed", err.Error())
		case errors.Is(err, errUpstreamEvent):
			return et.usage(), a.failEvent(err)
		case err != nil:
			if !a.sent && ctx.Err() == nil && errors.Is(err, translate.ErrMalformedUpstream) {
				return et.usage(), badUpstream(err.Error())
			}
			return et.usage(), a.fail("upstream_error", err.Error())
		case end:
			return ended()
		}
	}
}

// silence is how long the upstream of a stream may stay silent now: the
// first event timeout until something reached the client, the stall
// timeout after.
//
// Neither an event the client does not see (a usage-only chunk, a ping)
// nor a keep-alive comment begins the answer: until an event that does,
// the upstream keeps the first event timeout, and the next connection may
// still answer if it falls silent that long. But an upstream that shows it
// is alive is not given up: a model that thinks for minutes, its upstream
// saying so with comments (OpenRouter's ": OPENROUTER PROCESSING"), would
// otherwise be left for the next connection, and the user would pay for
// the question twice. A stream that stays alive and never answers ends
// with the client, whose leaving cancels the call: the gateway sets no
// overall bound on an answer's time.
func (a *attempt) silence() time.Duration {
	if a.sent {
		return a.svc.opts.StallTimeout
	}
	return a.svc.opts.FirstEventTimeout
}

// comment takes a keep-alive comment of the stream as a sign of life: the
// watchdog waits its full time again.
func (a *attempt) comment() {
	a.alive = true
	a.watchdog.Reset(a.silence())
}

// fail ends a stream: after the first event it is committed (the client gets
// an in-band error); before it, the next connection may try.
func (a *attempt) fail(code, msg string) error {
	err := &credential.StreamError{Code: code, Message: msg}
	if a.sent {
		return credential.Committed(err)
	}
	return badUpstream(msg)
}
