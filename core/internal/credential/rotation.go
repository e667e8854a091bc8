package credential

import (
	"cmp"
	"slices"
	"sync"
)

// rotation is the sticky round-robin state of an engine, per (machine,
// provider). It lives in memory: each replica rotates on its own.
type rotation struct {
	mu    sync.Mutex
	seq   uint64
	state map[rotationKey]*rotationState
}

type rotationKey struct{ machine, provider string }

type rotationState struct {
	last string            // connection used last
	run  int               // consecutive uses of last
	used map[string]uint64 // connection id -> sequence number of its last use
}

// arrange reorders cands, already in tier and priority order, for
// round-robin within each tier: the last used connection first while its
// run is shorter than limit, then the others from least to most recently
// used (never used ones first, in priority order).
func (r *rotation) arrange(key rotationKey, cands []Candidate, limit int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state[key]
	if st == nil {
		return
	}
	rank := func(c Candidate) uint64 {
		if c.ConnectionID == st.last && st.run < limit {
			return 0
		}
		return st.used[c.ConnectionID] + 1
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Tier, b.Tier), cmp.Compare(rank(a), rank(b)))
	})
}

// use records that the connection id is being tried now; cands are the
// request's candidates, used to forget connections that are gone.
func (r *rotation) use(key rotationKey, id string, cands []Candidate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = make(map[rotationKey]*rotationState)
	}
	st := r.state[key]
	if st == nil {
		st = &rotationState{used: make(map[string]uint64, len(cands))}
		r.state[key] = st
	}
	r.seq++
	st.used[id] = r.seq
	if st.last == id {
		st.run++
	} else {
		st.last, st.run = id, 1
	}
	if len(st.used) > 2*len(cands) {
		for k := range st.used {
			if !seen(cands, k) {
				delete(st.used, k)
			}
		}
	}
}
