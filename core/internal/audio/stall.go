package audio

import (
	"context"
	"io"
	"time"

	"github.com/switchboardhq/switchboard/internal/upstream"
)

// watchdog is one upstream call whose response body is timed by an
// upstream.StallReader: a read of it that waits on the upstream longer than
// the timeout cancels the call. Only reads are timed, so that what is done
// between them, such as handing audio to a slow client, does not count as
// the upstream's silence.
type watchdog struct {
	// call is the call's context: the upstream request is made with it.
	call    context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
	sr      *upstream.StallReader // nil until the body is read
}

func (s *Service) watch(ctx context.Context) *watchdog {
	w := &watchdog{timeout: s.opts.StallTimeout}
	w.call, w.cancel = context.WithCancelCause(ctx)
	return w
}

// body times the reads of a response body.
func (w *watchdog) body(rc io.ReadCloser) io.ReadCloser {
	w.sr = upstream.NewStallReader(rc, w.timeout, w.timeout, w.cancel)
	return stallBody{StallReader: w.sr, rc: rc}
}

// close ends the watch and the call.
func (w *watchdog) close() {
	if w.sr != nil {
		w.sr.Stop()
	}
	w.cancel(nil)
}

// err is the attempt's error for a failed read of the body: an
// *upstream.StallError (a timeout) when the watchdog cut it.
func (w *watchdog) err(err error) error {
	if w.sr == nil {
		return err
	}
	return w.sr.Err(w.call, err)
}

type stallBody struct {
	*upstream.StallReader
	rc io.ReadCloser
}

func (b stallBody) Close() error {
	b.Stop()
	return b.rc.Close()
}
