package telemetry

import (
	"sync"
	"sync/atomic"
)

// SeriesCache maps metric label values to their series, so that a request
// does not format and hash its labels into a vector again. Reads take no
// lock: the map is replaced, never changed, when a series is added. Use it
// for label values that are bounded (providers, outcomes, endpoints), so
// that it stays small. The zero value is ready.
type SeriesCache[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

// Get returns k's series, made with add the first time k is seen.
func (c *SeriesCache[K, V]) Get(k K, add func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	size := 1
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		size += len(*old)
	}
	next := make(map[K]V, size)
	if old != nil {
		for ok, ov := range *old {
			next[ok] = ov
		}
	}
	v := add()
	next[k] = v
	c.m.Store(&next)
	return v
}
