package chat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/spine"
)

// Session affinity: a request that carries a conversation identity goes
// first to the connection that served the conversation last, while it is
// healthy, whatever the routing strategy, so the upstream's prompt cache
// stays warm. When that connection cools down the engine passes it over and
// the conversation moves to whichever connection answers.

// AffinityStore remembers which connection serves a session. Keys are
// opaque (machine and a digest of the identity).
type AffinityStore interface {
	Get(ctx context.Context, key string) (connectionID string, err error)
	Put(ctx context.Context, key, connectionID string) error
}

// KVAffinity is an AffinityStore on a key-value bucket whose TTL forgets
// idle sessions; every core replica sees the same affinities.
type KVAffinity struct {
	KV jetstream.KeyValue
	// JS reaches the bucket's leader (Get); nil takes the bucket's answer.
	JS jetstream.JetStream
}

// affinityConfirmWait bounds asking the bucket's leader about a session
// the replica's member does not hold: a miss costs a cold prompt cache,
// not worth holding a new session's first request up for long while the
// bucket elects a leader.
const affinityConfirmWait = 500 * time.Millisecond

func (s KVAffinity) Get(ctx context.Context, key string) (string, error) {
	// In a cluster, a member that has not yet applied a session's move
	// recorded a moment ago through another member misses it, and the
	// session would move again: the leader confirms a miss, within
	// affinityConfirmWait; a session found pays nothing more.
	v, _, err := kvmirror.GetConfirmed(ctx, s.JS, s.KV, key, affinityConfirmWait)
	if errors.Is(err, kvmirror.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

func (s KVAffinity) Put(ctx context.Context, key, connectionID string) error {
	_, err := s.KV.Put(ctx, key, []byte(connectionID))
	return err
}

// sessionHeaders are the client headers that name a session: ours, and
// Codex's.
var sessionHeaders = []string{"x-session-id", "session_id"}

// session returns the conversation identity of a request, "" for none:
// an explicit header, Claude Code's metadata.user_id (which carries its
// session), or a prompt_cache_key.
func (in inbound) session() string {
	for _, h := range sessionHeaders {
		if v := in.header[h]; v != "" {
			return "h:" + v
		}
	}
	if raw, ok := in.fields["metadata"]; ok && in.dialect == DialectMessages {
		var m struct {
			UserID string `json:"user_id"`
		}
		if json.Unmarshal(raw, &m) == nil && m.UserID != "" {
			return "u:" + m.UserID
		}
	}
	if raw, ok := in.fields["prompt_cache_key"]; ok {
		var k string
		if json.Unmarshal(raw, &k) == nil && k != "" {
			return "k:" + k
		}
	}
	return ""
}

// affinityKey is the store key of a session of a machine and model.
func affinityKey(machineID, model, session string) string {
	sum := sha256.Sum256([]byte(model + "\x00" + session))
	return machineID + "." + hex.EncodeToString(sum[:16])
}

// affinity returns the key of the request's session and the connection
// that served it, if any.
func (s *Service) affinity(ctx context.Context, machineID string, in inbound) (key, prefer string) {
	if s.opts.Affinity == nil {
		return "", ""
	}
	sess := in.session()
	if sess == "" {
		return "", ""
	}
	key = affinityKey(machineID, in.model, sess)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	prefer, err := s.opts.Affinity.Get(ctx, key)
	if err != nil {
		s.log(ctx, "reading a session affinity failed", err)
	}
	return key, prefer
}

// affinityRefresh is how often an active session that stays on its
// connection is written again so that it does not expire: a quarter of the
// bucket's TTL, not on every request (a write is a JetStream round trip
// before the answer ends).
const affinityRefresh = spine.AffinityTTL / 4

// maxRefreshes bounds the sessions whose last write this process
// remembers; past it the record starts over (each is written once more).
const maxRefreshes = 8192

// refreshes are when this process last wrote each session's affinity.
type refreshes struct {
	mu sync.Mutex
	at map[string]time.Time
}

// due reports whether key should be written at now, and if so counts it
// as written.
func (r *refreshes) due(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.at[key]; ok && now.Sub(t) < affinityRefresh {
		return false
	}
	r.markLocked(key, now)
	return true
}

// mark counts key as written at now.
func (r *refreshes) mark(key string, now time.Time) {
	r.mu.Lock()
	r.markLocked(key, now)
	r.mu.Unlock()
}

func (r *refreshes) markLocked(key string, now time.Time) {
	if r.at == nil || len(r.at) >= maxRefreshes {
		r.at = make(map[string]time.Time)
	}
	r.at[key] = now
}

// forget drops key's last write (it failed).
func (r *refreshes) forget(key string) {
	r.mu.Lock()
	delete(r.at, key)
	r.mu.Unlock()
}

// keepAlive writes the session's connection again when its last write from
// this process is older than affinityRefresh, so an active session does
// not expire.
func (s *Service) keepAlive(ctx context.Context, key, connectionID string) {
	if key == "" || connectionID == "" || !s.refreshed.due(key, time.Now()) {
		return
	}
	if !s.remember(ctx, key, connectionID) {
		s.refreshed.forget(key)
	}
}

// remember records the connection that served the session, and reports
// whether it was stored.
func (s *Service) remember(ctx context.Context, key, connectionID string) bool {
	if key == "" || connectionID == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := s.opts.Affinity.Put(ctx, key, connectionID); err != nil {
		s.log(ctx, "recording a session affinity failed", err)
		return false
	}
	s.refreshed.mark(key, time.Now())
	return true
}
