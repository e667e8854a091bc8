package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"
)

// Errors of a guarded body (see BodyGuard), answered 503 and 408.
var (
	// ErrBodyMemory: the edge already holds as many body bytes as it may,
	// and none were freed within the wait.
	ErrBodyMemory = errors.New("the server holds too many request bodies; try again")
	// ErrBodySlow: the body arrived slower than the minimum transfer rate.
	ErrBodySlow = errors.New("the request body arrived too slowly")
)

// readChunk is the most a guarded body reads (and reserves) at once.
const readChunk = 64 << 10

// SmallBody is the largest declared body that BodyGuard.Small holds.
const SmallBody = 64 << 10

// BodyGuard bounds what request bodies cost the edge: the total of body
// bytes held in memory at once (Memory) and how slowly a body may arrive
// (MinRate after Grace).
type BodyGuard struct {
	// Memory bounds the body bytes held at once across requests (nil: no
	// bound). A read past it waits up to MemoryWait, then fails with
	// ErrBodyMemory.
	Memory     *semaphore.Weighted
	MemoryWait time.Duration
	// Small is a separate bound for bodies that declare at most SmallBody
	// bytes, so large bodies filling Memory do not keep small requests
	// out (nil: they share Memory).
	Small *semaphore.Weighted
	// MinRate is the slowest a body may arrive, in bytes per second: a
	// body's read deadline is its start plus Grace plus one second per
	// MinRate bytes received, and never more than Grace past the last
	// read. Zero: no deadline.
	MinRate int64
	Grace   time.Duration
}

// Body is a request body under a BodyGuard. Its bytes count against the
// guard's memory bound until Release (when held).
type Body struct {
	r     io.ReadCloser
	g     *BodyGuard
	ctx   context.Context
	rc    http.ResponseController
	hold  bool
	sem   *semaphore.Weighted
	start time.Time
	n     int64
	held  int64
	err   error
	eof   bool
}

type bodyKey struct{}

// BodySlot holds the guarded Body of one request. A middleware that keeps
// per-request state in one allocation embeds a BodySlot there and puts it
// in the request's context (WithBodySlot); Guard then fills it instead of
// allocating the Body and copying the request for its context.
type BodySlot struct {
	body       Body
	set        bool
	limited    limited // Limit's wrapper of the body
	limitedSet bool
}

// WithBodySlot returns ctx with s as the place Guard keeps the body.
func WithBodySlot(ctx context.Context, s *BodySlot) context.Context {
	return context.WithValue(ctx, bodyKey{}, s)
}

// Guard replaces r's body with a guarded one and returns the request to
// pass on (its context finds the Body: see BodyError) and the Body, whose
// Release returns what it holds, to call once the handler returned (nil
// for a request without a body: nothing to release). hold says whether
// the handler keeps the body in memory (a streaming handler does not, and
// only gets the rate limit).
func (g *BodyGuard) Guard(w http.ResponseWriter, r *http.Request, hold bool) (*http.Request, *Body) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, nil
	}
	slot, _ := r.Context().Value(bodyKey{}).(*BodySlot)
	if slot == nil || slot.set {
		slot = &BodySlot{}
		r = r.WithContext(WithBodySlot(r.Context(), slot))
	}
	slot.set = true
	b := &slot.body
	*b = Body{r: r.Body, g: g, ctx: r.Context(), rc: *http.NewResponseController(w), hold: hold && g.Memory != nil, start: time.Now(), sem: g.Memory}
	if g.Small != nil && r.ContentLength >= 0 && r.ContentLength <= SmallBody {
		b.sem = g.Small
	}
	r.Body = b
	b.extend()
	return r, b
}

// bodyOf is the guarded Body of r's context, or nil.
func bodyOf(ctx context.Context) *Body {
	if s, ok := ctx.Value(bodyKey{}).(*BodySlot); ok && s.set {
		return &s.body
	}
	return nil
}

// BodyError is the guard's error of r's body (ErrBodyMemory, ErrBodySlow),
// or nil: how a handler that only sees a wrapped read error finds the
// status to answer.
func BodyError(r *http.Request) error {
	if r == nil {
		return nil
	}
	if b := bodyOf(r.Context()); b != nil {
		return b.err
	}
	return nil
}

// Read reads at most readChunk bytes, first reserving them under the
// memory bound, and moves the read deadline by the bytes received.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.eof {
		return 0, io.EOF
	}
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	if b.hold && len(p) > 0 && !b.sem.TryAcquire(int64(len(p))) {
		// Only a read that has to wait pays for the timeout's context
		// (TryAcquire fails while others wait, so the queue keeps its
		// order).
		ctx, cancel := context.WithTimeout(b.ctx, b.g.MemoryWait)
		err := b.sem.Acquire(ctx, int64(len(p)))
		cancel()
		if err != nil {
			b.err = ErrBodyMemory
			return 0, b.err
		}
	}
	n, err := b.r.Read(p)
	if b.hold {
		b.held += int64(n)
		if unused := int64(len(p) - n); unused > 0 {
			b.sem.Release(unused)
		}
	}
	b.n += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.eof = true
		// The server reads ahead once the body ended: no deadline on it.
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = ErrBodySlow
		}
		b.err = err
	case n > 0:
		b.extend()
	}
	return n, err
}

// extend sets the read deadline the bytes received so far earned.
func (b *Body) extend() {
	if b.g.MinRate <= 0 {
		return
	}
	earned := b.start.Add(b.g.Grace + time.Duration(float64(b.n)/float64(b.g.MinRate)*float64(time.Second)))
	if idle := time.Now().Add(b.g.Grace); earned.After(idle) {
		earned = idle
	}
	_ = b.rc.SetReadDeadline(earned)
}

// Close closes the underlying body.
func (b *Body) Close() error { return b.r.Close() }

// Release returns the bytes the body holds to the memory bound. A nil
// Body holds nothing.
func (b *Body) Release() {
	if b == nil {
		return
	}
	if b.hold && b.held > 0 {
		b.sem.Release(b.held)
		b.held = 0
	}
	// A body left unread keeps its deadline: the server discards what
	// is left of a small one before answering, and a client that stalls
	// there must not hold the answer (and the connection) forever. The
	// server resets the deadlines for the connection's next request.
}

// Limit caps r's body at limit bytes (http.MaxBytesReader); the
// *http.MaxBytesError of a read past it is also what BodyError reports.
func Limit(w http.ResponseWriter, r *http.Request, limit int64) {
	rc := http.MaxBytesReader(w, r.Body, limit)
	if s, ok := r.Context().Value(bodyKey{}).(*BodySlot); ok && s.set && !s.limitedSet {
		// The guarded body's slot has room for the wrapper too.
		s.limitedSet = true
		s.limited = limited{ReadCloser: rc, b: &s.body}
		r.Body = &s.limited
		return
	}
	r.Body = &limited{ReadCloser: rc, b: bodyOf(r.Context())}
}

type limited struct {
	io.ReadCloser
	b *Body
}

func (l *limited) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	if err != nil && err != io.EOF && l.b != nil && l.b.err == nil {
		// Only here: errors.As's target escapes, an allocation per read.
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			l.b.err = err
		}
	}
	return n, err
}

// BodyProblem is the answer to a failed body read: 413 past the size
// limit, 503 past the memory bound, 408 for a body too slow, else 400.
func BodyProblem(r *http.Request, err error) Problem {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || errors.As(BodyError(r), &tooBig):
		return TooLarge(tooBig.Limit)
	case errors.Is(err, ErrBodyMemory) || errors.Is(BodyError(r), ErrBodyMemory):
		p := NewProblem(http.StatusServiceUnavailable, "server_busy", ErrBodyMemory.Error(), "")
		p.RetryAfter = time.Second
		return p
	case errors.Is(err, ErrBodySlow) || errors.Is(BodyError(r), ErrBodySlow):
		return NewProblem(http.StatusRequestTimeout, "request_timeout", ErrBodySlow.Error(), "")
	}
	return NewProblem(http.StatusBadRequest, "invalid_body", "could not read the request body", "")
}

// TooLarge is the 413 of a body over limit bytes.
func TooLarge(limit int64) Problem {
	return NewProblem(http.StatusRequestEntityTooLarge, "request_too_large",
		"request body is larger than "+strconv.FormatInt(limit, 10)+" bytes", "")
}
