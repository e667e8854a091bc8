package tokenrefresh

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// rotatingProvider is a token endpoint that rotates refresh tokens: each
// one is good for one grant, and a spent one is refused with invalid_grant
// (which means a new login).
type rotatingProvider struct {
	*httptest.Server
	mu        sync.Mutex
	valid     string
	presented []string
}

func newRotatingProvider(t *testing.T) *rotatingProvider {
	p := &rotatingProvider{valid: oldRefresh}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		p.mu.Lock()
		defer p.mu.Unlock()
		rt := r.PostForm.Get("refresh_token")
		p.presented = append(p.presented, rt)
		w.Header().Set("Content-Type", "application/json")
		if rt != p.valid {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		p.valid = newRefresh
		_, _ = io.WriteString(w, `{"access_token":"`+newAccess+`","refresh_token":"`+newRefresh+`","expires_in":3600}`)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *rotatingProvider) refreshTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.presented...)
}

// Core is unreachable for longer than a blip (a restart, a NATS leader
// election) right after the provider rotated the refresh token: the job
// keeps offering the new tokens until core takes them, and the login
// survives.
func TestTokenRefreshRotatedTokensWaitForCoreWithinTheJob(t *testing.T) {
	p := newRotatingProvider(t)
	admin := newFakeAdmin(p.URL+"/token", 3)
	down := status.Error(codes.Unavailable, "core restarting")
	admin.storeErrs = []error{down, down, down, down, down, down, down, down}
	r, _ := newRefresher(admin)

	ctx, cancel := context.WithTimeout(context.Background(), JobTimeout)
	defer cancel()
	require.NoError(t, r.Handle(ctx, job(3)))
	assert.Equal(t, []string{oldRefresh}, p.refreshTokens())
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.Equal(t, newRefresh, stored[0].GetRefreshToken(), "the rotated refresh token is stored")
	assert.False(t, stored[0].GetNeedsRelogin())
	assert.Equal(t, uint64(4), admin.creds.GetGeneration())
}

// Core is unreachable for the whole job after the provider rotated the
// refresh token: the next attempt (a redelivery, in another worker process)
// stores the tokens the provider answered instead of presenting the spent
// refresh token, so the connection does not need a new login. The kept
// tokens are sealed, and forgotten once stored.
func TestTokenRefreshRotatedTokensSurviveCoreDownForTheWholeJob(t *testing.T) {
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	p := newRotatingProvider(t)
	admin := newFakeAdmin(p.URL+"/token", 3)
	admin.setStoreDown(status.Error(codes.Unavailable, "core restarting"))
	one, _ := newRefresher(admin)
	one.WithLeases(KVLeases{KV: kv}, "one")
	two, _ := newRefresher(admin)
	two.WithLeases(KVLeases{KV: kv}, "two")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := one.Handle(ctx, job(3))
	cancel()
	require.Error(t, err, "core was down for the whole job: the job is redelivered")
	assert.Empty(t, admin.storedRequests())

	key := "pending." + machineID + "." + connID + ".3"
	kept, err := kv.Get(context.Background(), key)
	require.NoError(t, err, "the provider's answer is kept for the next attempt")
	for _, s := range testSecrets {
		assert.NotContains(t, string(kept.Value()), s, "kept tokens are sealed")
	}

	admin.setStoreDown(nil)
	require.NoError(t, two.Handle(context.Background(), job(3)))
	assert.Equal(t, []string{oldRefresh}, p.refreshTokens(), "the spent refresh token is not presented again")
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.False(t, stored[0].GetNeedsRelogin())
	assert.Equal(t, newAccess, stored[0].GetAccessToken())
	assert.Equal(t, newRefresh, stored[0].GetRefreshToken(), "the rotated refresh token reaches core")
	assert.Equal(t, uint64(4), admin.creds.GetGeneration())
	_, err = kv.Get(context.Background(), key)
	assert.ErrorIs(t, err, jetstream.ErrKeyNotFound, "stored tokens are forgotten")
}

// Tokens kept from a refresh of earlier material (a new login stored other
// tokens since) are not stored over the new ones: the refresh starts from
// the stored material.
func TestTokenRefreshKeptTokensOfEarlierMaterialAreDropped(t *testing.T) {
	kv := spinetest.Bucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	p := newRotatingProvider(t)
	admin := newFakeAdmin(p.URL+"/token", 3)
	admin.setStoreDown(status.Error(codes.Unavailable, "core restarting"))
	r, _ := newRefresher(admin)
	r.WithLeases(KVLeases{KV: kv}, "one")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	require.Error(t, r.Handle(ctx, job(3)))
	cancel()

	// A new login at the same generation.
	admin.mu.Lock()
	admin.creds.RefreshToken = "rt-login-77d0e2"
	admin.storeDown = nil
	admin.mu.Unlock()
	p.mu.Lock()
	p.valid = "rt-login-77d0e2"
	p.mu.Unlock()

	require.NoError(t, r.Handle(context.Background(), job(3)))
	assert.Equal(t, []string{oldRefresh, "rt-login-77d0e2"}, p.refreshTokens())
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.False(t, stored[0].GetNeedsRelogin())
}

// In a cluster tokens an attempt kept are found by the next attempt the
// moment they were kept, through any member: a worker connected to a
// member that has not applied them yet (one a slower link away from the
// bucket's leader; a key-value get is answered by the member a client is
// connected to) does not take them for absent, which would present the
// spent refresh token, answered by a provider that rotates refresh tokens
// with a new login.
func TestTokenRefreshKeptTokensFoundThroughALaggingMember(t *testing.T) {
	ctx := context.Background()
	c := spinetest.StartCluster(t, 3)
	leader, slow := c.LaggingBucket(t, spine.BucketRefreshLeases, spine.Topology{}.Buckets())
	one, two := KVLeases{KV: leader.KV, JS: leader.JS}, KVLeases{KV: slow.KV, JS: slow.JS}

	const rounds = 20
	missed := 0
	for i := range rounds {
		key := pendingKey(machineID, connID, uint64(i))
		require.NoError(t, one.PutPending(ctx, key, []byte("sealed tokens")))
		got, err := two.Pending(ctx, key)
		require.NoError(t, err)
		if got == nil {
			missed++
			continue
		}
		assert.Equal(t, "sealed tokens", string(got))
	}
	assert.Zero(t, missed, "kept tokens taken for absent, of %d", rounds)

	got, err := two.Pending(ctx, pendingKey(machineID, connID, rounds))
	require.NoError(t, err)
	assert.Nil(t, got, "none kept")
}
