package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// NewVerifier returns a PKCE code verifier (RFC 7636 section 4.1): 32
// random bytes, base64url without padding, 43 characters.
func NewVerifier() string { return randomString(32) }

// Challenge is the S256 code challenge of a verifier (RFC 7636 section
// 4.2): BASE64URL(SHA256(verifier)).
func Challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// NewState returns an unguessable value for an OAuth state or flow id.
func NewState() string { return randomString(24) }

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}
