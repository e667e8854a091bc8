package tokenrefresh

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
)

// reuseDetectingProvider is a token endpoint that answers after delay and
// rotates refresh tokens as OpenAI's (Codex) does: a refresh token is good
// for one grant, and a spent one presented again is answered 401
// refresh_token_reused and revokes the whole login, the tokens its first
// grant answered included. Like a real server it completes a grant whose
// client stopped waiting.
type reuseDetectingProvider struct {
	*httptest.Server
	delay     time.Duration
	mu        sync.Mutex
	valid     string
	spent     map[string]bool
	presented []string
}

func newReuseDetectingProvider(t *testing.T, delay time.Duration) *reuseDetectingProvider {
	p := &reuseDetectingProvider{delay: delay, valid: oldRefresh, spent: map[string]bool{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		rt := r.PostForm.Get("refresh_token")
		p.mu.Lock()
		p.presented = append(p.presented, rt)
		p.mu.Unlock()
		time.Sleep(p.delay)
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if rt != p.valid {
			if p.spent[rt] {
				p.valid = "" // the whole login is revoked
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":{"message":"Your refresh token has already been used to generate a new access token. Please try signing in again.","type":"invalid_request_error","param":null,"code":"refresh_token_reused"}}`)
				return
			}
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Could not validate your refresh token.","type":"invalid_request_error","param":null,"code":"refresh_token_invalidated"}}`)
			return
		}
		p.spent[rt] = true
		p.valid = newRefresh
		_, _ = io.WriteString(w, `{"access_token":"`+newAccess+`","refresh_token":"`+newRefresh+`","expires_in":864000}`)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *reuseDetectingProvider) refreshTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.presented...)
}

// consume handles j as the job queue does: each attempt bounded by
// JobTimeout, a failed one redelivered after the queue's backoff (2 s,
// 4 s, ...) to the next of workers, until an attempt succeeds or the
// provider was presented a refresh token twice.
func consume(t *testing.T, p *reuseDetectingProvider, workers []*Refresher, gen uint64) {
	t.Helper()
	for attempt := 1; attempt <= 4; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), JobTimeout)
		err := workers[(attempt-1)%len(workers)].Handle(ctx, job(gen))
		cancel()
		if err == nil || len(p.refreshTokens()) > 1 {
			return
		}
		t.Logf("attempt %d failed: %v", attempt, err)
		time.Sleep(time.Duration(1<<attempt) * time.Second)
	}
}

// A token endpoint that takes 16 s to answer (OpenAI's has been seen to)
// is waited for: the refresh token is presented once, and the rotated
// tokens are stored. Given up on and asked again while it still worked
// on the first grant, the endpoint would see the refresh token twice and
// revoke the login.
func TestTokenRefreshWaitsForASlowEndpoint(t *testing.T) {
	t.Parallel()
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	p := newReuseDetectingProvider(t, 16*time.Second)
	admin := newFakeAdmin(p.URL+"/token", 3)
	one, _ := newRefresher(admin)
	one.WithLeases(KVLeases{KV: kv}, "one")
	two, _ := newRefresher(admin)
	two.WithLeases(KVLeases{KV: kv}, "two")

	consume(t, p, []*Refresher{one, two}, 3)
	assert.Equal(t, []string{oldRefresh}, p.refreshTokens(), "the refresh token is presented once")
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.False(t, stored[0].GetNeedsRelogin(), "the login is kept: %s", stored[0].GetError())
	assert.Equal(t, newRefresh, stored[0].GetRefreshToken())
	assert.Equal(t, uint64(4), admin.creds.GetGeneration())
}

// A grant the endpoint was sent but did not answer (the connection broke
// under it) may still be in the provider's works: a retry in another
// process does not present the refresh token again while the first
// attempt's lease lasts, and presents it once the lease has lapsed.
func TestTokenRefreshUnansweredGrantKeepsTheLease(t *testing.T) {
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	var mu sync.Mutex
	var presented []string
	cut := true
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		presented = append(presented, r.PostForm.Get("refresh_token"))
		c := cut
		mu.Unlock()
		if c {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"`+newAccess+`","refresh_token":"`+newRefresh+`"}`)
	}))
	t.Cleanup(ts.Close)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	one, logs := newRefresher(admin)
	one.WithLeases(KVLeases{KV: kv}, "one")
	two, _ := newRefresher(admin)
	two.WithLeases(KVLeases{KV: kv}, "two")
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(presented)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := one.Handle(ctx, job(3))
	cancel()
	var un *Unanswered
	require.ErrorAs(t, err, &un)
	assertNoSecrets(t, "the job error", err.Error())
	assertNoSecrets(t, "the log", logs.String())
	mu.Lock()
	cut = false
	mu.Unlock()

	require.ErrorIs(t, two.Handle(context.Background(), job(3)), ErrLeaseHeld)
	require.ErrorIs(t, one.Handle(context.Background(), job(3)), ErrLeaseHeld)
	assert.Equal(t, 1, count(), "not presented again while the lease lasts")
	assert.Empty(t, admin.storedRequests())

	require.Eventually(t, func() bool { return two.Handle(context.Background(), job(3)) == nil }, 10*time.Second, 250*time.Millisecond)
	assert.Equal(t, 2, count())
	require.Len(t, admin.storedRequests(), 1)
	assert.Equal(t, uint64(4), admin.creds.GetGeneration())
}

// A grant the endpoint was sent but did not answer on the job's last
// attempt is recorded on the connection, and still keeps the lease until
// it lapses: another job of the connection (a request's) does not present
// the refresh token while the provider may still be at work on it.
func TestTokenRefreshUnansweredLastAttemptKeepsTheLease(t *testing.T) {
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	var mu sync.Mutex
	presented := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		presented++
		mu.Unlock()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(ts.Close)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	one, logs := newRefresher(admin)
	one.WithLeases(KVLeases{KV: kv}, "one")
	two, _ := newRefresher(admin)
	two.WithLeases(KVLeases{KV: kv}, "two")

	ctx, cancel := context.WithTimeout(jobs.AsLastAttempt(context.Background()), 5*time.Second)
	err := one.Handle(ctx, job(3))
	cancel()
	var un *Unanswered
	assert.ErrorAs(t, err, &un, "the job ends unanswered")
	stored := admin.storedRequests()
	require.Len(t, stored, 1, "the last attempt's failure is recorded")
	assert.Contains(t, stored[0].GetError(), "token refresh failed on its last attempt")
	assertNoSecrets(t, "the log", logs.String())

	require.ErrorIs(t, two.Handle(context.Background(), job(3)), ErrLeaseHeld)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, presented, "not presented again while the lease lasts")
}
