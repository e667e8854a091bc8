package embeddings

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// errStalled is the cause of a call its watchdog cancelled.
var errStalled = errors.New("upstream body stalled")

// stallReader reads an upstream body and cancels its call with errStalled
// when one read waits on the upstream longer than the timeout. Only reads
// are timed (a timer armed and stopped around each), so that nothing done
// between them counts as the upstream's silence. The timer's goroutine
// exists only if it fires.
type stallReader struct {
	r       io.Reader
	timer   *time.Timer
	timeout time.Duration
}

func newStallReader(r io.Reader, timeout time.Duration, cancel context.CancelCauseFunc) *stallReader {
	return &stallReader{r: r, timer: time.AfterFunc(timeout, func() { cancel(errStalled) }), timeout: timeout}
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.timer.Reset(s.timeout)
	n, err := s.r.Read(p)
	s.timer.Stop()
	return n, err
}

// stop ends the watch.
func (s *stallReader) stop() { s.timer.Stop() }

// err is the attempt's error for a failed read of the call whose context is
// ctx: a stallError when the watchdog cut it.
func (s *stallReader) err(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errStalled) {
		return &stallError{msg: fmt.Sprintf("the upstream sent nothing for %s while its answer was read", s.timeout)}
	}
	return err
}

// stallError is an answer the upstream stopped sending. It is a timeout
// (Timeout reports true): the credential engine cools the connection and
// gives the request to the next one.
type stallError struct{ msg string }

func (e *stallError) Error() string { return e.msg }

// Timeout marks the error as a timeout for credential.Classify.
func (e *stallError) Timeout() bool { return true }
