package userauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

func TestHS256(t *testing.T) {
	v := New(Config{Secret: "s3cret-s3cret"})
	tok, err := Mint("s3cret-s3cret", "user-1", "u@example.com", time.Hour)
	require.NoError(t, err)
	u, err := v.Verify(context.Background(), tok)
	require.NoError(t, err)
	require.Equal(t, User{ID: "user-1", Email: "u@example.com"}, u)

	other, err := Mint("other-secret", "user-1", "", time.Hour)
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), other)
	require.ErrorIs(t, err, ErrInvalidToken)

	_, err = New(Config{}).Verify(context.Background(), tok)
	require.ErrorIs(t, err, ErrNotConfigured)
	_, err = v.Verify(context.Background(), "")
	require.ErrorIs(t, err, ErrNoToken)
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "  Bearer   abc ": "abc", "Basic abc": "", "Bearer": "", "": "",
	} {
		got, ok := BearerToken(header)
		require.Equal(t, want, got, header)
		require.Equal(t, want != "", ok, header)
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func TestJWKS(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecBytes, err := ecKey.PublicKey.Bytes()
	require.NoError(t, err)
	set := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(ecBytes[1:33]), "y": b64(ecBytes[33:])},
		{"kty": "oct", "kid": "skip", "k": "AAAA"},
	}}
	fetches := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches++
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	v := New(Config{JWKSURL: srv.URL})
	claims := jwt.MapClaims{"sub": "user-9", "email": "nine@example.com", "exp": time.Now().Add(time.Hour).Unix()}

	rs := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	rs.Header["kid"] = "r1"
	rsTok, err := rs.SignedString(rsaKey)
	require.NoError(t, err)
	es := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	es.Header["kid"] = "e1"
	esTok, err := es.SignedString(ecKey)
	require.NoError(t, err)

	for _, tok := range []string{rsTok, esTok} {
		u, err := v.Verify(context.Background(), tok)
		require.NoError(t, err)
		require.Equal(t, User{ID: "user-9", Email: "nine@example.com"}, u)
	}
	require.Equal(t, 1, fetches, "the key set is cached")

	// An unknown kid, and HS256 without a secret, are refused.
	unknown := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	unknown.Header["kid"] = "nope"
	unknownTok, err := unknown.SignedString(rsaKey)
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), unknownTok)
	require.ErrorIs(t, err, ErrInvalidToken)
	hs, err := Mint("whatever", "user-9", "", time.Hour)
	require.NoError(t, err)
	_, err = v.Verify(context.Background(), hs)
	require.ErrorIs(t, err, ErrInvalidToken)
}

func FuzzVerify(f *testing.F) {
	tok, _ := Mint("fuzz-secret", "u", "e", time.Hour)
	f.Add(tok)
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, token string) {
		v := New(Config{Secret: "fuzz-secret"})
		u, err := v.Verify(context.Background(), token)
		if err == nil {
			require.NotEmpty(t, u.ID)
		}
	})
}
