package audio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultStallTimeout bounds an upstream's silence while its answer is read
// (chat's default for a stream's).
const DefaultStallTimeout = 60 * time.Second

// errStalled is the cause of a call its watchdog cancelled.
var errStalled = errors.New("upstream body stalled")

// watchdog is one upstream call whose response body is timed: a read of it
// that waits on the upstream longer than the timeout cancels the call. Only
// reads are timed (a timer armed and stopped around each), so that what is
// done between them, such as handing audio to a slow client, does not
// count as the upstream's silence. The timer's goroutine exists only if it
// fires.
type watchdog struct {
	// call is the call's context: the upstream request is made with it.
	call    context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
	timer   *time.Timer // nil until the body is read
}

func (s *Service) watch(ctx context.Context) *watchdog {
	w := &watchdog{timeout: s.opts.StallTimeout}
	w.call, w.cancel = context.WithCancelCause(ctx)
	return w
}

// body times the reads of a response body.
func (w *watchdog) body(rc io.ReadCloser) io.ReadCloser {
	w.timer = time.AfterFunc(w.timeout, func() { w.cancel(errStalled) })
	return &stallBody{rc: rc, w: w}
}

// close ends the watch and the call.
func (w *watchdog) close() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cancel(nil)
}

// err is the attempt's error for a failed read of the body: a stallError
// when the watchdog cut it.
func (w *watchdog) err(err error) error {
	if err != nil && errors.Is(context.Cause(w.call), errStalled) {
		return &stallError{msg: fmt.Sprintf("the upstream sent nothing for %s while its answer was read", w.timeout)}
	}
	return err
}

type stallBody struct {
	rc io.ReadCloser
	w  *watchdog
}

func (b *stallBody) Read(p []byte) (int, error) {
	b.w.timer.Reset(b.w.timeout)
	n, err := b.rc.Read(p)
	b.w.timer.Stop()
	return n, err
}

func (b *stallBody) Close() error {
	b.w.timer.Stop()
	return b.rc.Close()
}

// stallError is an answer the upstream stopped sending. It is a timeout
// (Timeout reports true): before anything reached the client, the
// credential engine cools the connection and gives the request to the next
// one.
type stallError struct{ msg string }

func (e *stallError) Error() string { return e.msg }

// Timeout marks the error as a timeout for credential.Classify.
func (e *stallError) Timeout() bool { return true }
