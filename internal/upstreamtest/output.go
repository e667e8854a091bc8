package upstreamtest

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
)

// chunkClass tells stream faults what a chunk is.
type chunkClass uint8

const (
	chunkContent  chunkClass = iota // role, content and tool call deltas, Anthropic block events
	chunkFinish                     // finish_reason and usage chunks, Anthropic message_delta and the last content_block_stop
	chunkTerminal                   // data: [DONE], Anthropic message_stop
)

// output writes one response and applies the stream part of a fault to it.
type output struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request
	rc        *http.ResponseController
	fault     Fault
	prov      provider
	sse       bool // the response is a server-sent event stream
	sent      int  // chunks written so far
	malformed bool // the malformed chunk was written
	stopped   bool // NoFinish ended the stream
	failed    bool // a write failed: the client went away
}

// abort drops the connection without finishing the response. net/http
// recovers http.ErrAbortHandler silently and closes the connection.
func abort() { panic(http.ErrAbortHandler) }

// send writes a complete single-chunk response with a Content-Length.
// An empty contentType keeps the Content-Type already set.
func (o *output) send(status int, contentType string, body []byte) {
	h := o.w.Header()
	if contentType != "" {
		h["Content-Type"] = []string{contentType}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	o.w.WriteHeader(status)
	o.chunk(chunkContent, body)
	o.end()
}

// sendJSON is send with Content-Type application/json.
func (o *output) sendJSON(status int, body []byte) {
	o.send(status, "application/json", body)
}

// startStream writes the status line and headers of a chunked response and
// flushes them, so that the client sees the status before the first chunk.
func (o *output) startStream(contentType string, sse bool) {
	o.sse = sse
	h := o.w.Header()
	h["Content-Type"] = []string{contentType}
	if sse {
		h["Cache-Control"] = []string{"no-cache"}
	}
	o.w.WriteHeader(http.StatusOK)
	_ = o.rc.Flush()
}

// chunk writes one chunk and flushes it, applying the stream fault first.
// It reports whether the handler should go on producing chunks.
func (o *output) chunk(class chunkClass, b []byte) bool {
	if o.stopped || o.failed {
		return false
	}
	f := &o.fault
	switch f.kind {
	case faultNoDone:
		if class == chunkTerminal {
			return true
		}
	case faultNoFinish:
		if class != chunkContent {
			o.stopped = true
			return false
		}
	}
	if o.sent == f.n {
		switch f.kind {
		case faultCut:
			o.cut()
		case faultStall:
			o.stall()
		case faultMalformed:
			o.writeMalformed()
		}
	}
	if o.sent > 0 && o.sse && o.s.cfg.chunkDelay > 0 && !o.s.wait(o.r.Context(), o.s.cfg.chunkDelay) {
		abort()
	}
	o.sent++
	if _, err := o.w.Write(b); err != nil {
		o.failed = true
		return false
	}
	_ = o.rc.Flush()
	return true
}

// end finishes the response. A cut or stall fault that did not trigger
// because the response has too few chunks triggers now, and a malformed
// chunk not yet written is written last.
func (o *output) end() {
	if o.failed {
		return
	}
	switch o.fault.kind {
	case faultCut:
		o.cut()
	case faultStall:
		if !o.sse {
			// The client has the whole body; drop the connection so that it
			// is not reused while this handler would be stalled.
			abort()
		}
		o.stall()
	case faultMalformed:
		o.writeMalformed()
	}
}

// cut flushes what was written, headers included, then drops the
// connection.
func (o *output) cut() {
	_ = o.rc.Flush()
	abort()
}

// stall holds the response until the client goes away or the server closes,
// then drops the connection.
func (o *output) stall() {
	_ = o.rc.Flush()
	o.s.wait(o.r.Context(), -1)
	abort()
}

func (o *output) writeMalformed() {
	if !o.sse || o.malformed {
		return
	}
	o.malformed = true
	line := "data: {not json\n\n"
	if o.prov == providerAnthropic {
		line = "event: content_block_delta\ndata: {not json\n\n"
	}
	if _, err := o.w.Write([]byte(line)); err != nil {
		o.failed = true
		return
	}
	_ = o.rc.Flush()
}

// reset closes the connection with SO_LINGER 0 so that the kernel sends a
// TCP RST instead of a FIN.
func (o *output) reset() {
	conn, _, err := o.rc.Hijack()
	if err != nil {
		abort()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// wait blocks for d (forever if d < 0) and reports whether the time
// elapsed; it returns false early when the client goes away (ctx) or the
// server closes.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d < 0 {
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}
