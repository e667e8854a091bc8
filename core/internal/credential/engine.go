package credential

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Strategies of [Request.Strategy].
const (
	// StrategyFillFirst tries the candidates in priority order (the default).
	StrategyFillFirst = "fill-first"
	// StrategyRoundRobin keeps the last used connection for StickyLimit
	// consecutive requests, then moves to the least recently used one.
	StrategyRoundRobin = "round-robin"
	// DefaultStickyLimit is the round-robin run length when none is set.
	DefaultStickyLimit = 3
)

// Candidate is one connection the engine may use.
type Candidate struct {
	// ConnectionID identifies the connection; cooldowns are keyed by it.
	ConnectionID string
	// Tier orders the candidates before Priority, lowest first: the
	// router's tier of the connection for the model (routing.Tier), so a
	// connection whose model list leaves the model out is tried after the
	// others whatever its priority.
	Tier int
	// Priority orders the candidates of one tier, lowest first.
	Priority int32
	// CanRefresh reports whether the connection has OAuth refresh material.
	CanRefresh bool
	// Value is the caller's own payload needed to make the call (for
	// instance the decrypted credential); the engine only asks it, when it
	// is a [Scrubber], to remove the credential from an error's text.
	Value any
}

// Request describes one gateway request.
type Request struct {
	// MachineID (tenant) and Provider scope the round-robin state.
	MachineID, Provider string
	// Model is the upstream model; cooldowns are per (connection, model).
	Model string
	// Candidates are the active connections of the provider, in any order.
	// The engine does not modify the slice.
	Candidates []Candidate
	// Strategy is StrategyFillFirst (default, also for unknown values) or
	// StrategyRoundRobin.
	Strategy string
	// StickyLimit is the round-robin run length; zero or less means
	// DefaultStickyLimit.
	StickyLimit int
	// Prefer names a candidate tried first, whatever the strategy, while
	// it is not cooling down (session affinity); using it does not move the
	// round-robin rotation.
	Prefer string
}

// Attempt makes one upstream call with one candidate. It returns nil on
// success, an [*UpstreamError] (or an error wrapping one) for an HTTP error
// answer, or any other error for network failures and timeouts. An attempt
// that has already sent bytes to the client wraps its error with
// [Committed]. The attempt should bound its own wait for the upstream (a
// first-byte timeout); its deadline is a timeout, not a cancellation.
type Attempt func(ctx context.Context, c Candidate) error

// Refresher refreshes a connection's OAuth token. The engine calls it at most
// once per candidate and request, on a 401/403 of a candidate with
// CanRefresh, and retries that connection once with the candidate it
// returns. Marking a connection as needing re-login when the refresh token
// is rejected, and de-duplicating concurrent refreshes, are its business.
type Refresher interface {
	Refresh(ctx context.Context, c Candidate) (Candidate, error)
}

// RefreshFunc adapts a function to [Refresher].
type RefreshFunc func(ctx context.Context, c Candidate) (Candidate, error)

var _ Refresher = RefreshFunc(nil)

// Refresh calls f.
func (f RefreshFunc) Refresh(ctx context.Context, c Candidate) (Candidate, error) {
	return f(ctx, c)
}

// Result reports how a request was served.
type Result struct {
	// Candidate is the candidate of the last attempt: the one that answered
	// when Do returns no error (after a refresh, with the refreshed Value).
	// It is the zero Candidate when no attempt was made.
	Candidate Candidate
	// Attempts counts the calls of the attempt function, refresh retries
	// included.
	Attempts int
	// Failed lists, in order, the connections that failed with a
	// fallback-eligible error in this request and were cooled down.
	Failed []Failure
}

// Engine selects credentials, falls back and keeps cooldowns. It is safe for
// concurrent use; the round-robin state lives in it, per (machine, provider).
type Engine struct {
	cooldowns Cooldowns
	refresher Refresher
	now       func() time.Time
	log       *slog.Logger
	rotation  rotation
}

// Option configures an [Engine].
type Option func(*Engine)

// WithRefresher sets the OAuth token refresher; without one, 401/403 fall
// back at once.
func WithRefresher(r Refresher) Option { return func(e *Engine) { e.refresher = r } }

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.now = now } }

// WithLogger sets the logger for fallbacks and store errors (default:
// discard).
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// New returns an engine keeping its cooldowns in cooldowns; nil means a
// [MemoryCooldowns] private to the engine.
func New(cooldowns Cooldowns, opts ...Option) *Engine {
	e := &Engine{}
	for _, o := range opts {
		o(e)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if cooldowns == nil {
		cooldowns = NewMemoryCooldowns(e.now, 0)
	}
	e.cooldowns = cooldowns
	return e
}

// Do serves req: it tries the candidates in order with attempt until one
// succeeds, skipping the ones cooling down for the model, and cools down the
// ones that fail with a fallback-eligible error.
//
// It returns nil when a candidate succeeded; ErrNoCredentials when there are
// no candidates; the caller's ctx.Err() as soon as the caller's context is
// done (nothing is cooled then); the attempt's own error, unchanged, for a
// failure that is not fallback-eligible or is [Committed]; and an
// [*ExhaustedError] when every candidate failed or was cooling down. The
// Result is filled in every case.
func (e *Engine) Do(ctx context.Context, req Request, attempt Attempt) (Result, error) {
	var res Result
	if len(req.Candidates) == 0 {
		return res, ErrNoCredentials
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	// Up to eight candidates are ordered on the stack.
	var buf [8]Candidate
	order := append(buf[:0], req.Candidates...)
	slices.SortStableFunc(order, byPriority)
	roundRobin := req.Strategy == StrategyRoundRobin
	var key rotationKey
	if roundRobin {
		key = rotationKey{req.MachineID, req.Provider}
		e.rotation.arrange(key, order, stickyLimit(req.StickyLimit))
	}
	preferred := false
	if req.Prefer != "" {
		if i := slices.IndexFunc(order, func(c Candidate) bool { return c.ConnectionID == req.Prefer }); i > 0 {
			p := order[i]
			copy(order[1:i+1], order[:i])
			order[0] = p
		}
		preferred = len(order) > 0 && order[0].ConnectionID == req.Prefer
	}

	var t tally
	t.allRateLimited = true
	for i, c := range order {
		if seen(order[:i], c.ConnectionID) {
			continue
		}
		prev, hasPrev := e.cooldowns.Get(c.ConnectionID, req.Model)
		if hasPrev && prev.Until.After(e.now()) {
			t.add(prev.Until, prev.Reason)
			continue
		}
		if roundRobin && !(preferred && i == 0) {
			e.rotation.use(key, c.ConnectionID, order)
		}
		f, until, done, err := e.try(ctx, req, c, attempt, &res, prev, hasPrev)
		if done {
			return res, err
		}
		t.add(until, f.Reason)
		if up := upstream(f.Err); up != nil {
			t.last = up
		}
		t.tried = true
	}
	return res, e.exhausted(req, &t)
}

// try serves the request with one candidate, refreshing its token once on
// 401/403. done reports that Do must return err; otherwise the candidate
// failed with f, was cooled down until until, and the next one is due.
func (e *Engine) try(ctx context.Context, req Request, c Candidate, attempt Attempt, res *Result,
	prev Cooldown, hasPrev bool) (f Failure, until time.Time, done bool, err error) {
	cur, refreshed := c, false
	for {
		res.Attempts++
		res.Candidate = cur
		aerr := attempt(ctx, cur)
		if aerr == nil {
			if hasPrev {
				e.clear(ctx, prev)
			}
			return Failure{}, time.Time{}, true, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return Failure{}, time.Time{}, true, cerr
		}
		f = Classify(aerr, e.now())
		f.ConnectionID = c.ConnectionID
		f.Cause = transportCause(&f, cur.Value)
		if !f.Fallback {
			return f, time.Time{}, true, aerr
		}
		if f.Reason == ReasonAuth && !f.Committed && !refreshed && cur.CanRefresh && e.refresher != nil {
			refreshed = true
			next, rerr := e.refresher.Refresh(ctx, cur)
			if rerr == nil {
				cur = next
				continue
			}
			if cerr := ctx.Err(); cerr != nil {
				return Failure{}, time.Time{}, true, cerr
			}
			f.Err = fmt.Errorf("%w (token refresh failed: %w)", aerr, rerr)
		}
		until = e.cool(ctx, req, &f, prev, hasPrev)
		res.Failed = append(res.Failed, f)
		if f.Committed {
			return f, until, true, aerr
		}
		return f, until, false, nil
	}
}

// cool records the cooldown f deserves and returns its end. A rate-limit
// failure without an upstream hint backs off by the connection's level.
func (e *Engine) cool(ctx context.Context, req Request, f *Failure, prev Cooldown, hasPrev bool) time.Time {
	level := 0
	if f.Reason.RateLimited() {
		level = 1
		if hasPrev && prev.Reason.RateLimited() {
			level = min(prev.Level+1, maxLevel)
		}
		if f.RetryAfter == 0 {
			f.Cooldown = backoff(level)
		}
	}
	cd := Cooldown{
		ConnectionID: f.ConnectionID,
		Model:        req.Model,
		Until:        e.now().Add(f.Cooldown),
		Level:        level,
		Reason:       f.Reason,
		Status:       f.Status,
		Message:      describe(f),
	}
	// The record must outlive a client that hangs up right now.
	if err := e.cooldowns.Put(context.WithoutCancel(ctx), cd); err != nil {
		e.log.WarnContext(ctx, "credential: storing cooldown failed",
			"connection", f.ConnectionID, "model", req.Model, "error", err)
	}
	e.log.InfoContext(ctx, "credential: connection failed, cooling down",
		"machine", req.MachineID, "provider", req.Provider, "model", req.Model,
		"connection", f.ConnectionID, "reason", string(f.Reason), "status", f.Status,
		"cause", f.Cause, "cooldown", f.Cooldown, "level", level, "committed", f.Committed)
	// The store kept a longer cooldown another request wrote during this
	// attempt: the connection is back when that one ends.
	if cur, ok := e.cooldowns.Get(f.ConnectionID, req.Model); ok && cur.Until.After(cd.Until) {
		return cur.Until
	}
	return cd.Until
}

// clear removes, after a success, the cooldown record the request read
// before its attempt; one written since by another request stays.
func (e *Engine) clear(ctx context.Context, prev Cooldown) {
	if err := e.cooldowns.Clear(context.WithoutCancel(ctx), prev); err != nil {
		e.log.WarnContext(ctx, "credential: clearing cooldown failed",
			"connection", prev.ConnectionID, "model", prev.Model, "error", err)
	}
}

// tally accumulates, over the candidates of one request, what the outcome
// needs when none succeeds.
type tally struct {
	allRateLimited bool      // every candidate skipped or failed for rate limits/quota
	anyRate        bool      // at least one of them for a rate limit, not a quota
	tried          bool      // at least one attempt was made
	earliest       time.Time // earliest cooldown end among the candidates
	last           *UpstreamError
}

func (t *tally) add(until time.Time, r Reason) {
	if !r.RateLimited() {
		t.allRateLimited = false
	}
	if r == ReasonRateLimited {
		t.anyRate = true
	}
	if t.earliest.IsZero() || until.Before(t.earliest) {
		t.earliest = until
	}
}

// CoolingError is the answer when every credential named by what is
// cooling until wait has passed: 429 rate_limited when all of them are rate
// limited, else 503 cooling down; last is the upstream answer behind it,
// if any.
func CoolingError(what string, rateLimited bool, wait time.Duration, last *UpstreamError) *ExhaustedError {
	if rateLimited {
		return &ExhaustedError{
			Status: 429, Code: CodeRateLimited, RetryAfter: wait, Last: last,
			Message: what + " are rate limited (reset after " + wait.String() + ")",
		}
	}
	return &ExhaustedError{
		Status: 503, Code: CodeCoolingDown, RetryAfter: wait, Last: last,
		Message: what + " are cooling down (reset after " + wait.String() + ")",
	}
}

// QuotaError is the answer when every credential named by what is out of
// quota (or budget, or credit) until wait has passed: 429 with OpenAI's
// insufficient_quota, not a rate limit a client would wait out in seconds;
// last is the upstream answer behind it, if any.
func QuotaError(what string, wait time.Duration, last *UpstreamError) *ExhaustedError {
	return &ExhaustedError{
		Status: 429, Code: CodeQuotaExceeded, RetryAfter: wait, Last: last,
		Message: what + " are out of quota (reset after " + wait.String() + ")",
	}
}

// exhausted builds the outcome error when no candidate served the request.
// Credentials all out of quota are not rate limited: the provider's own
// answer, which says why (OpenAI's insufficient_quota, Anthropic's credit
// balance), is passed through when one was asked in this request.
func (e *Engine) exhausted(req Request, t *tally) *ExhaustedError {
	scope := "[" + req.Provider + "/" + req.Model + "] "
	switch {
	case t.allRateLimited && !t.anyRate && t.last != nil:
		return &ExhaustedError{
			Status: t.last.Status, Code: CodeUpstreamError, Last: t.last,
			Message: scope + "all credentials are out of quota; last upstream answer " + statusText(t.last.Status),
		}
	case t.allRateLimited && !t.anyRate:
		return QuotaError(scope+"all credentials", retryAfter(t.earliest, e.now()), nil)
	case t.allRateLimited:
		return CoolingError(scope+"all credentials", true, retryAfter(t.earliest, e.now()), t.last)
	case !t.tried:
		return CoolingError(scope+"all credentials", false, retryAfter(t.earliest, e.now()), nil)
	case t.last != nil:
		return &ExhaustedError{
			Status: t.last.Status, Code: CodeUpstreamError, Last: t.last,
			Message: scope + "all credentials failed; last upstream answer " + statusText(t.last.Status),
		}
	default:
		return &ExhaustedError{
			Status: 502, Code: CodeUpstreamUnreachable,
			Message: scope + "no upstream answered (network errors or timeouts)",
		}
	}
}

// retryAfter is the time until until, rounded up to whole seconds, at least
// one second.
func retryAfter(until, now time.Time) time.Duration {
	d := until.Sub(now)
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}

// describe is a secret-free summary of a failure: the upstream's status,
// or the transport error's class and scrubbed text (f.Cause); never an
// upstream body, which may echo credentials.
func describe(f *Failure) string {
	var b strings.Builder
	b.WriteString(string(f.Reason))
	switch {
	case f.Status != 0:
		b.WriteString(": upstream answered ")
		b.WriteString(statusText(f.Status))
	case f.Cause != "":
		b.WriteString(": ")
		b.WriteString(f.Cause)
	}
	if f.Committed {
		b.WriteString(" (after the response started)")
	}
	return b.String()
}

// upstream returns the upstream HTTP error err carries, if any.
func upstream(err error) *UpstreamError {
	var up *UpstreamError
	if errors.As(err, &up) && up != nil && up.Status > 0 {
		return up
	}
	return nil
}

// byPriority orders candidates by tier, then ascending priority, then
// connection id.
func byPriority(a, b Candidate) int {
	return cmp.Or(cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Priority, b.Priority), strings.Compare(a.ConnectionID, b.ConnectionID))
}

// seen reports whether id occurs in cs.
func seen(cs []Candidate, id string) bool {
	for i := range cs {
		if cs[i].ConnectionID == id {
			return true
		}
	}
	return false
}

func stickyLimit(n int) int {
	if n <= 0 {
		return DefaultStickyLimit
	}
	return n
}
