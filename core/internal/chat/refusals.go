package chat

import (
	"sync"
	"time"
)

// reasoningRefusals remembers the connections and models whose upstream
// refused the reasoning sent back as reasoning_content (Groq, Cerebras,
// strict schemas behind an openai-compatible connection), so that the
// turns of a tool loop after the first are not each refused once before
// being asked again without it. A memory lasts refusalMemory; a refusal of
// a request sent without the reasoning because of it ends it at once (the
// server behind the connection may have changed to one that needs it).
type reasoningRefusals struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const (
	// refusalMemory is how long a refusal is remembered: the server is
	// asked with the reasoning again after it.
	refusalMemory = 10 * time.Minute
	// maxRefusals bounds the memory (model names come from clients).
	maxRefusals = 1024
)

func refusalKey(connID, model string) string { return connID + "\x00" + model }

// refuses reports whether key's upstream refused reasoning lately.
func (r *reasoningRefusals) refuses(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.m[key]
	if ok && now.Sub(at) >= refusalMemory {
		delete(r.m, key)
		return false
	}
	return ok
}

// remember records that key's upstream refused reasoning at now.
func (r *reasoningRefusals) remember(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= maxRefusals {
		r.m = make(map[string]time.Time)
	}
	r.m[key] = now
}

// forget ends key's memory.
func (r *reasoningRefusals) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
}
