package userauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// Tokens minted for another application by a shared identity provider carry
// its keys' signature but another audience (or another issuer): refused.
func TestIssuerAndAudience(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	set := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r1", "use": "sig", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(set) }))
	t.Cleanup(srv.Close)
	const secret = "s3cret-s3cret-s3cret"
	v := New(Config{Secret: secret, JWKSURL: srv.URL, Issuer: "https://idp.example/", Audience: "switchboard"})

	signRS := func(iss string, aud any) string {
		claims := jwt.MapClaims{"sub": "user-1", "exp": time.Now().Add(time.Hour).Unix()}
		if iss != "" {
			claims["iss"] = iss
		}
		if aud != nil {
			claims["aud"] = aud
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = "r1"
		s, err := tok.SignedString(rsaKey)
		require.NoError(t, err)
		return s
	}
	hs := func(iss, aud string) string {
		s, err := MintFor(secret, iss, aud, "user-1", "", time.Hour)
		require.NoError(t, err)
		return s
	}
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"right issuer and audience", signRS("https://idp.example/", "switchboard"), true},
		{"audience among several", signRS("https://idp.example/", []string{"other-app", "switchboard"}), true},
		{"another application's audience", signRS("https://idp.example/", "other-app"), false},
		{"no audience", signRS("https://idp.example/", nil), false},
		{"another issuer", signRS("https://evil.example/", "switchboard"), false},
		{"no issuer", signRS("", "switchboard"), false},
		{"hs256 with right claims", hs("https://idp.example/", "switchboard"), true},
		{"hs256 with the default issuer", hs("switchboard", "switchboard"), false},
		{"hs256 without audience", hs("https://idp.example/", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := v.Verify(context.Background(), tt.token)
			if tt.ok {
				require.NoError(t, err)
				require.Equal(t, "user-1", u.ID)
				return
			}
			require.ErrorIs(t, err, ErrInvalidToken)
		})
	}
}

// Algorithms are pinned to their key source: HS256 only with the secret
// (never with a JWKS key as HMAC secret), a JWKS key only for what its type
// and its "alg" member allow, "none" never.
func TestAlgorithmsPinned(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ec384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	ecBytes, err := ec384.PublicKey.Bytes()
	require.NoError(t, err)
	set := map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "rs", "alg": "RS256", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())},
		{"kty": "EC", "kid": "ec", "crv": "P-384", "x": b64(ecBytes[1:49]), "y": b64(ecBytes[49:])},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(set) }))
	t.Cleanup(srv.Close)
	v := New(Config{JWKSURL: srv.URL})
	claims := jwt.MapClaims{"sub": "user-1", "exp": time.Now().Add(time.Hour).Unix()}
	sign := func(m jwt.SigningMethod, kid string, key any) string {
		tok := jwt.NewWithClaims(m, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}
	none := sign(jwt.SigningMethodNone, "rs", jwt.UnsafeAllowNoneSignatureType)
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"RS256 with its key", sign(jwt.SigningMethodRS256, "rs", rsaKey), true},
		{"PS256 with a key marked RS256", sign(jwt.SigningMethodPS256, "rs", rsaKey), false},
		{"ES384 with a P-384 key", sign(jwt.SigningMethodES384, "ec", ec384), true},
		{"none", none, false},
		{"HS256 signed with the RSA modulus", sign(jwt.SigningMethodHS256, "rs", rsaKey.N.Bytes()), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), tt.token)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidToken)
		})
	}
}
