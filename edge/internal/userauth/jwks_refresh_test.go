package userauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tokens naming unknown key ids cannot make every request wait on the JWKS
// URL: a failed or fruitless refresh is not retried for a while.
func TestJWKSRefreshIsRateLimited(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	j := NewJWKS(srv.URL, srv.Client())
	for range 5 {
		_, err := j.Key(context.Background(), "made-up", "RS256")
		assert.Error(t, err)
	}
	assert.EqualValues(t, 1, fetches.Load())
}

// heldIdP is an identity provider whose answers wait until the test lets
// them go: started tells each fetch's arrival, release lets every fetch
// (held or later) answer the set keys returns.
type heldIdP struct {
	started chan struct{}
	release chan struct{}
	fetches atomic.Int32
	hold    func(n int32) bool // whether the n-th fetch (from 1) waits
	keys    func() []map[string]string
}

func newHeldIdP(t *testing.T, hold func(n int32) bool, keys func() []map[string]string) (*heldIdP, *httptest.Server) {
	p := &heldIdP{started: make(chan struct{}, 16), release: make(chan struct{}), hold: hold, keys: keys}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.fetches.Add(1)
		p.started <- struct{}{}
		if p.hold(n) {
			select {
			case <-p.release:
			case <-r.Context().Done():
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": p.keys()})
	}))
	t.Cleanup(srv.Close)
	return p, srv
}

func rsaJWK(kid string, k *rsa.PrivateKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func signRS256(t *testing.T, key *rsa.PrivateKey, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": "user-1", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

// verifyGivingUp runs Verify with a context that ends once the key-set
// fetch it started reached the identity provider, as a client hanging up
// mid-request does, and returns once Verify returned.
func verifyGivingUp(t *testing.T, v *Verifier, idp *heldIdP, token string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := v.Verify(ctx, token)
		done <- err
	}()
	<-idp.started
	cancel()
	require.Error(t, <-done)
}

// A request that gives up while its token's key set is being fetched (a
// client hanging up, or anyone sending a token naming any kid and closing
// the connection) neither cancels the fetch nor spends the refresh of the
// next 30 s: the next user's token, signed with a key only the fetched set
// holds, is accepted.
func TestJWKSRefreshOutlivesTheRequestThatStartedIt(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	idp, srv := newHeldIdP(t, func(int32) bool { return true }, func() []map[string]string {
		return []map[string]string{rsaJWK("r2", key)}
	})
	v := New(Config{JWKSURL: srv.URL})

	verifyGivingUp(t, v, idp, signRS256(t, key, "r2"))
	close(idp.release)

	u, err := v.Verify(context.Background(), signRS256(t, key, "r2"))
	require.NoError(t, err, "a valid token is refused after another request gave up on the key set")
	require.Equal(t, "user-1", u.ID)
	require.EqualValues(t, 1, idp.fetches.Load(), "the fetch in flight is shared, not repeated")
}

// A key the identity provider withdrew stops being trusted once the cached
// set is stale and the provider answers, even when the request that started
// the refresh gave up on it: the stale set is served only while the URL
// fails, and it did not fail.
func TestJWKSWithdrawnKeyIsDroppedAfterAGivenUpRefresh(t *testing.T) {
	oldKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	newKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	var rotated atomic.Bool
	idp, srv := newHeldIdP(t, func(n int32) bool { return n > 1 }, func() []map[string]string {
		if rotated.Load() {
			return []map[string]string{rsaJWK("new", newKey)}
		}
		return []map[string]string{rsaJWK("old", oldKey)}
	})
	v := New(Config{JWKSURL: srv.URL})
	_, err = v.Verify(context.Background(), signRS256(t, oldKey, "old"))
	require.NoError(t, err)
	<-idp.started

	// The provider withdraws "old"; the cached set grows stale.
	rotated.Store(true)
	v.jwks.mu.Lock()
	v.jwks.fetched = time.Now().Add(-jwksTTL - time.Minute)
	v.jwks.tried = v.jwks.fetched
	v.jwks.mu.Unlock()

	verifyGivingUp(t, v, idp, signRS256(t, oldKey, "anything"))
	close(idp.release)

	_, err = v.Verify(context.Background(), signRS256(t, oldKey, "old"))
	require.ErrorIs(t, err, ErrInvalidToken, "a token signed with a key the provider withdrew is still accepted")
	_, err = v.Verify(context.Background(), signRS256(t, newKey, "new"))
	require.NoError(t, err)
}

// While one request waits on a slow key-set URL (a made-up kid starts a
// fetch), tokens whose key is cached and fresh are checked at once.
func TestJWKSCachedKeysDoNotWaitOnAFetch(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	idp, srv := newHeldIdP(t, func(n int32) bool { return n > 1 }, func() []map[string]string {
		return []map[string]string{rsaJWK("r1", key)}
	})
	v := New(Config{JWKSURL: srv.URL})
	good := signRS256(t, key, "r1")
	_, err = v.Verify(context.Background(), good)
	require.NoError(t, err)
	<-idp.started
	// Past the refresh rate limit without waiting for it.
	v.jwks.mu.Lock()
	v.jwks.tried = time.Now().Add(-jwksMinRefresh - time.Minute)
	v.jwks.mu.Unlock()

	madeUp := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), signRS256(t, key, "made-up"))
		madeUp <- err
	}()
	<-idp.started // the second fetch is held

	cached := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), good)
		cached <- err
	}()
	select {
	case err := <-cached:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		close(idp.release)
		t.Fatal("a token with a cached, fresh key waited on another request's key-set fetch")
	}
	close(idp.release)
	require.ErrorIs(t, <-madeUp, ErrInvalidToken, "a kid the fetched set does not hold is an invalid token")
}

// A token whose key cannot be had because the JWKS URL fails is not called
// invalid: it may well be valid, and its user should not be signed out.
// Once the URL answers, a key id the set does not hold is invalid.
func TestJWKSOutageIsNotAnInvalidToken(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			http.Error(w, "upstream down", http.StatusBadGateway)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{rsaJWK("k1", key)}})
	}))
	t.Cleanup(srv.Close)
	v := New(Config{JWKSURL: srv.URL})

	_, err = v.Verify(context.Background(), signRS256(t, key, "k1"))
	require.ErrorIs(t, err, ErrKeysUnavailable)
	require.NotErrorIs(t, err, ErrInvalidToken)

	up.Store(true)
	v.jwks.mu.Lock()
	v.jwks.tried = time.Now().Add(-jwksMinRefresh - time.Minute)
	v.jwks.mu.Unlock()
	_, err = v.Verify(context.Background(), signRS256(t, key, "k1"))
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), signRS256(t, key, "made-up"))
	require.ErrorIs(t, err, ErrInvalidToken)
	require.NotErrorIs(t, err, ErrKeysUnavailable)
}
