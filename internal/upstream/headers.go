package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

type wholeAnswerKey struct{}

// WholeAnswer returns ctx for a call whose upstream answers whole, its
// headers sent only once the answer is written (a non-streamed completion,
// embeddings, a transcription): the wait for them is bounded by
// Options.WholeAnswer, not by Options.FirstByte.
func WholeAnswer(ctx context.Context) context.Context {
	return context.WithValue(ctx, wholeAnswerKey{}, true)
}

// headerBound bounds the wait for a call's response headers by the call's
// own bound, from the moment its request is written, as
// http.Transport.ResponseHeaderTimeout does for every call alike. The
// timer runs until the headers came; the body read after them is the
// caller's to time, under a context that lives until the body is closed.
type headerBound struct {
	next                   http.RoundTripper
	firstByte, wholeAnswer time.Duration
}

func (h headerBound) RoundTrip(req *http.Request) (*http.Response, error) {
	wait := h.firstByte
	if req.Context().Value(wholeAnswerKey{}) != nil && h.wholeAnswer > 0 {
		wait = h.wholeAnswer
	}
	if wait <= 0 {
		return h.next.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &headerWait{wait: wait, cancel: cancel}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: w.wrote})
	resp, err := h.next.RoundTrip(req.WithContext(ctx))
	if w.stop() {
		if resp != nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, &HeaderTimeoutError{Wait: wait}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (h headerBound) CloseIdleConnections() {
	if c, ok := h.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// headerWait is the timer of one call's wait for its headers, armed each
// time its request is written (the transport writes it again on a fresh
// connection when a kept-alive one was found closed).
type headerWait struct {
	wait   time.Duration
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	timer  *time.Timer
	done   bool
}

func (w *headerWait) wrote(httptrace.WroteRequestInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
	case w.timer == nil:
		w.timer = time.AfterFunc(w.wait, func() { w.cancel(errHeaderTimeout) })
	default:
		w.timer.Reset(w.wait)
	}
}

// stop ends the wait; it reports whether the timer cut the call.
func (w *headerWait) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	return w.timer != nil && !w.timer.Stop()
}

// errHeaderTimeout is the cause a headerWait cancels its call with.
var errHeaderTimeout = &HeaderTimeoutError{}

// HeaderTimeoutError is a call whose upstream sent no response headers
// within its bound. It is a timeout (Timeout reports true), as
// http.Transport's own: before anything reached the client, the credential
// engine cools the connection and gives the request to the next one.
type HeaderTimeoutError struct{ Wait time.Duration }

func (e *HeaderTimeoutError) Error() string {
	return fmt.Sprintf("timeout awaiting response headers (%s)", e.Wait)
}

// Timeout marks the error as a timeout for the credential engine.
func (e *HeaderTimeoutError) Timeout() bool { return true }

// cancelBody ends its call's context when it is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
