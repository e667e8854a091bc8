package credential

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/internal/clocktest"
)

// fakeClock is a settable clock; tests advance it instead of sleeping.
type fakeClock = clocktest.Clock

func newFakeClock() *fakeClock {
	return clocktest.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
}

// behaviour answers the n-th (1-based) call of a connection.
type behaviour func(n int, c Candidate) error

// fakeUpstream plays scripted behaviours per connection and counts calls.
type fakeUpstream struct {
	mu     sync.Mutex
	script map[string]behaviour
	calls  map[string]int
	order  []string
}

func newUpstream(script map[string]behaviour) *fakeUpstream {
	return &fakeUpstream{script: script, calls: map[string]int{}}
}

func (u *fakeUpstream) attempt(_ context.Context, c Candidate) error {
	u.mu.Lock()
	u.calls[c.ConnectionID]++
	n := u.calls[c.ConnectionID]
	u.order = append(u.order, c.ConnectionID)
	b := u.script[c.ConnectionID]
	u.mu.Unlock()
	if b == nil {
		return nil
	}
	return b(n, c)
}

func (u *fakeUpstream) Calls(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[id]
}

func (u *fakeUpstream) Order() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.order...)
}

func ok() behaviour { return func(int, Candidate) error { return nil } }

func always(err error) behaviour { return func(int, Candidate) error { return err } }

// firstN fails the first n calls with err, then succeeds.
func firstN(n int, err error) behaviour {
	return func(i int, _ Candidate) error {
		if i <= n {
			return err
		}
		return nil
	}
}

// calls answers call i with errs[i-1] (nil: success); later calls succeed.
func calls(errs ...error) behaviour {
	return func(i int, _ Candidate) error {
		if i <= len(errs) {
			return errs[i-1]
		}
		return nil
	}
}

func upErr(status int, body string, kv ...string) *UpstreamError {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &UpstreamError{Status: status, Header: h, Body: []byte(body)}
}

func retryAfterHeader(sec int) *UpstreamError {
	return upErr(429, `{"error":{"message":"slow down"}}`, "Retry-After", strconv.Itoa(sec))
}

// timeoutErr is a network error that timed out, like a net.Error.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func cands(ids ...string) []Candidate {
	out := make([]Candidate, len(ids))
	for i, id := range ids {
		out[i] = Candidate{ConnectionID: id, Priority: int32(i + 1)}
	}
	return out
}

// countingCooldowns wraps a store and counts its calls.
type countingCooldowns struct {
	Cooldowns
	mu                sync.Mutex
	gets, puts, clear int
}

var _ Cooldowns = (*countingCooldowns)(nil)

func (c *countingCooldowns) Get(id, model string) (Cooldown, bool) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Cooldowns.Get(id, model)
}

func (c *countingCooldowns) Put(ctx context.Context, cd Cooldown) error {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Cooldowns.Put(ctx, cd)
}

func (c *countingCooldowns) Clear(ctx context.Context, cd Cooldown) error {
	c.mu.Lock()
	c.clear++
	c.mu.Unlock()
	return c.Cooldowns.Clear(ctx, cd)
}
