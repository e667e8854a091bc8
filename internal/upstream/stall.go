package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultStallTimeout is how long an upstream may go silent in the middle
// of its answer (a stream's events, a body's bytes) by default.
const DefaultStallTimeout = 60 * time.Second

// ErrStalled is the cause a StallReader cancels its call with.
var ErrStalled = errors.New("the upstream stopped sending its answer")

// StallReader reads an upstream response body and cancels its call with
// ErrStalled when one read waits on the upstream too long: first for the
// body's first byte, stall for each later one. Only reads are timed (a
// timer armed and stopped around each), so that nothing done between them
// (handing audio to a slow client) counts as the upstream's silence; the
// timer's goroutine exists only if it fires.
type StallReader struct {
	r            io.Reader
	timer        *time.Timer
	first, stall time.Duration
	got          bool // a byte came
}

// NewStallReader watches the reads of r; cancel ends the call r belongs to.
func NewStallReader(r io.Reader, first, stall time.Duration, cancel context.CancelCauseFunc) *StallReader {
	return &StallReader{r: r, timer: time.AfterFunc(first, func() { cancel(ErrStalled) }), first: first, stall: stall}
}

func (s *StallReader) Read(p []byte) (int, error) {
	if s.got {
		s.timer.Reset(s.stall)
	} else {
		s.timer.Reset(s.first)
	}
	n, err := s.r.Read(p)
	s.timer.Stop()
	if n > 0 {
		s.got = true
	}
	return n, err
}

// Stop ends the watch.
func (s *StallReader) Stop() { s.timer.Stop() }

// Err is the error of a failed read of the call whose context is call: a
// *StallError when the reader cut the call, err as it is otherwise.
func (s *StallReader) Err(call context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(call), ErrStalled) {
		return err
	}
	if s.got {
		return &StallError{msg: fmt.Sprintf("the upstream's answer stalled for %s", s.stall)}
	}
	return &StallError{msg: fmt.Sprintf("the upstream sent nothing for %s after its headers", s.first)}
}

// StallError is an answer the upstream stopped sending. It is a timeout
// (Timeout reports true): before anything reached the client, the credential
// engine cools the connection and gives the request to the next one.
type StallError struct{ msg string }

func (e *StallError) Error() string { return e.msg }

// Timeout marks the error as a timeout for the credential engine.
func (e *StallError) Timeout() bool { return true }
