package credential

import (
	"context"
	"sync"
	"time"
)

// Cooldown is the record of a connection's failure for one model.
type Cooldown struct {
	// ConnectionID and Model identify the record.
	ConnectionID, Model string
	// Until is when the connection may serve the model again.
	Until time.Time
	// Level counts consecutive rate-limit failures of the (connection,
	// model); it drives the exponential backoff and is 0 for other reasons.
	Level int
	// Reason is the class of the failure that caused the cooldown.
	Reason Reason
	// Status is the upstream's HTTP status, 0 when none answered.
	Status int
	// Message is a short, secret-free description for logs and admin views.
	Message string
}

// Cooldowns stores cooldowns. In production it is a KV bucket shared by all
// core replicas; [MemoryCooldowns] serves tests and single-process use.
//
// A store keeps a record past its Until for a while (its retention), so that
// the backoff level survives until the next failure: Get returns such a
// record and the engine compares Until with its own clock. Records past the
// retention are expired and ignored.
type Cooldowns interface {
	// Get returns the record of the connection for the model, if one is
	// retained. It is on every request's path and must be cheap (a local
	// read, no network round trip).
	Get(connectionID, model string) (Cooldown, bool)
	// Put stores c, replacing the record of the same connection and model
	// unless that record ends later: a failure of a request that was in
	// flight when a longer cooldown was written (a 429 with an hour's
	// Retry-After) never shortens it. Where several processes share the
	// store, the comparison and the write are one atomic step.
	Put(ctx context.Context, c Cooldown) error
	// Clear removes the record of c's connection and model if it is still
	// c (see [Cooldown.Same]): a success resets the cooldown and level its
	// request saw, not a record another request wrote since. Where several
	// processes share the store, the comparison and the removal are one
	// atomic step.
	Clear(ctx context.Context, c Cooldown) error
}

// Same reports whether c and o are the same record: the same connection
// and model, cooled until the same instant, at the same level, for the same
// reason and status. A record rewritten by a later failure differs from the
// one read before it in its Until.
func (c Cooldown) Same(o Cooldown) bool {
	return c.ConnectionID == o.ConnectionID && c.Model == o.Model && c.Until.Equal(o.Until) &&
		c.Level == o.Level && c.Reason == o.Reason && c.Status == o.Status
}

// DefaultRetention is how long [MemoryCooldowns] keeps a record after its
// Until by default: long enough for the backoff level to reach its cap.
const DefaultRetention = 30 * time.Minute

// MemoryCooldowns is a goroutine-safe in-memory [Cooldowns].
type MemoryCooldowns struct {
	now    func() time.Time
	retain time.Duration

	mu    sync.RWMutex
	m     map[cooldownKey]Cooldown
	puts  int
	sweep int
}

var _ Cooldowns = (*MemoryCooldowns)(nil)

type cooldownKey struct{ conn, model string }

// NewMemoryCooldowns returns an empty store that reads time from now (nil
// means time.Now) and keeps each record for retain after its Until (zero or
// less means DefaultRetention).
func NewMemoryCooldowns(now func() time.Time, retain time.Duration) *MemoryCooldowns {
	if now == nil {
		now = time.Now
	}
	if retain <= 0 {
		retain = DefaultRetention
	}
	return &MemoryCooldowns{now: now, retain: retain, m: make(map[cooldownKey]Cooldown), sweep: 64}
}

// Get returns the retained record of the connection for the model.
func (s *MemoryCooldowns) Get(connectionID, model string) (Cooldown, bool) {
	s.mu.RLock()
	c, ok := s.m[cooldownKey{connectionID, model}]
	s.mu.RUnlock()
	if !ok || s.expired(c, s.now()) {
		return Cooldown{}, false
	}
	return c, true
}

// Put stores c unless the record held ends later. Expired records are
// swept now and then.
func (s *MemoryCooldowns) Put(_ context.Context, c Cooldown) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := cooldownKey{c.ConnectionID, c.Model}
	if cur, ok := s.m[k]; ok && cur.Until.After(c.Until) && !s.expired(cur, s.now()) {
		return nil
	}
	s.m[k] = c
	if s.puts++; s.puts >= s.sweep {
		s.puts = 0
		now := s.now()
		for k, v := range s.m {
			if s.expired(v, now) {
				delete(s.m, k)
			}
		}
		// Sweep again after as many puts as there are live records, so the
		// sweeps cost O(1) per put on average.
		s.sweep = max(64, len(s.m))
	}
	return nil
}

// Clear removes the record of c's connection and model if it is still c.
func (s *MemoryCooldowns) Clear(_ context.Context, c Cooldown) error {
	k := cooldownKey{c.ConnectionID, c.Model}
	s.mu.Lock()
	if cur, ok := s.m[k]; ok && cur.Same(c) {
		delete(s.m, k)
	}
	s.mu.Unlock()
	return nil
}

func (s *MemoryCooldowns) expired(c Cooldown, now time.Time) bool {
	return now.After(c.Until.Add(s.retain))
}
