// Package apikey creates, checks and extracts Switchboard gateway API keys.
//
// A key has the form
//
//	sk-{machineId}-{keyId}-{crc}
//
// where machineId is 16 lowercase hex characters identifying the issuing
// machine, keyId is 6 random characters from [a-z0-9], and crc is the
// first 8 lowercase hex characters of HMAC-SHA256(secret, machineId+keyId).
// The checksum lets the gateway reject mistyped or forged keys without a
// database lookup; it is not what authenticates a key (the stored Hash is).
//
// Keys of the older form sk-{random}, with 8 or more characters from
// [A-Za-z0-9], are still accepted and reported as Legacy.
package apikey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

const (
	// Prefix starts every key.
	Prefix = "sk"

	// MachineIDLen is the length of a machine id in characters.
	MachineIDLen = 16
	// KeyIDLen is the length of a key id in characters.
	KeyIDLen = 6
	// ChecksumLen is the length of the checksum in characters.
	ChecksumLen = 8
	// LegacyMinLen is the minimum length of the random part of a legacy key.
	LegacyMinLen = 8
	// MaxLen bounds the length of any key Parse accepts, so that oversized
	// input is rejected before any further work.
	MaxLen = 256

	keyIDAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
)

var (
	// ErrMalformed reports a key that does not have a recognized shape.
	ErrMalformed = errors.New("apikey: malformed key")
	// ErrChecksum reports a well-formed key whose checksum does not match.
	ErrChecksum = errors.New("apikey: checksum mismatch")
)

// Key is the parsed, non-secret structure of an API key.
type Key struct {
	// MachineID is the issuing machine's id; empty for legacy keys.
	MachineID string
	// KeyID is the key's short random id; empty for legacy keys.
	KeyID string
	// Legacy reports an old-format sk-{random} key.
	Legacy bool
}

// NewMachineID returns a new random machine id: 8 random bytes as 16
// lowercase hex characters.
func NewMachineID() (string, error) {
	var b [MachineIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("apikey: generate machine id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ValidMachineID reports whether s is exactly 16 characters of [0-9a-f].
func ValidMachineID(s string) bool {
	if len(s) != MachineIDLen {
		return false
	}
	return isLowerHex(s)
}

// NewKeyID returns a new key id of KeyIDLen characters drawn uniformly
// from [a-z0-9].
func NewKeyID() (string, error) {
	// Rejection sampling: 252 is the largest multiple of 36 that fits in a
	// byte, so accepting only bytes below it keeps the distribution uniform.
	const limit = 256 - 256%len(keyIDAlphabet)
	out := make([]byte, 0, KeyIDLen)
	var buf [16]byte
	for len(out) < KeyIDLen {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("apikey: generate key id: %w", err)
		}
		for _, c := range buf {
			if int(c) >= limit {
				continue
			}
			out = append(out, keyIDAlphabet[int(c)%len(keyIDAlphabet)])
			if len(out) == KeyIDLen {
				break
			}
		}
	}
	return string(out), nil
}

// Format returns the key for machineID and keyID, with its checksum under
// secret. It does not validate its inputs: callers pass ids from
// NewMachineID and NewKeyID (or ones checked with ValidMachineID), since a
// key built from malformed ids will not Parse.
func Format(secret []byte, machineID, keyID string) string {
	return Prefix + "-" + machineID + "-" + keyID + "-" + checksum(secret, machineID, keyID)
}

// Parse checks raw and returns its structure. For the current format the
// parts must be well-formed and the checksum must match under secret;
// legacy keys carry no checksum and are only checked for shape.
//
// Errors wrap ErrMalformed or ErrChecksum and never contain raw.
func Parse(secret []byte, raw string) (Key, error) {
	if raw == "" {
		return Key{}, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(raw) > MaxLen {
		return Key{}, fmt.Errorf("%w: longer than %d characters", ErrMalformed, MaxLen)
	}
	parts := strings.Split(raw, "-")
	if parts[0] != Prefix {
		return Key{}, fmt.Errorf("%w: missing %q prefix", ErrMalformed, Prefix+"-")
	}
	switch len(parts) {
	case 2:
		if len(parts[1]) < LegacyMinLen || !isAlnum(parts[1]) {
			return Key{}, fmt.Errorf("%w: legacy key must have at least %d characters of [A-Za-z0-9]", ErrMalformed, LegacyMinLen)
		}
		return Key{Legacy: true}, nil
	case 4:
		machineID, keyID, crc := parts[1], parts[2], parts[3]
		if !ValidMachineID(machineID) {
			return Key{}, fmt.Errorf("%w: machine id must be %d lowercase hex characters", ErrMalformed, MachineIDLen)
		}
		if !validKeyID(keyID) {
			return Key{}, fmt.Errorf("%w: key id must be %d characters of [a-z0-9]", ErrMalformed, KeyIDLen)
		}
		if len(crc) != ChecksumLen || !isLowerHex(crc) {
			return Key{}, fmt.Errorf("%w: checksum must be %d lowercase hex characters", ErrMalformed, ChecksumLen)
		}
		want := checksum(secret, machineID, keyID)
		if !hmac.Equal([]byte(crc), []byte(want)) {
			return Key{}, ErrChecksum
		}
		return Key{MachineID: machineID, KeyID: keyID}, nil
	default:
		return Key{}, fmt.Errorf("%w: unexpected number of parts", ErrMalformed)
	}
}

// Hash returns the lowercase hex SHA-256 of raw. This is what gets stored
// and looked up; the raw key itself never is.
func Hash(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

// FromHeaders returns the API key presented in request headers, or "" if
// there is none. It checks, in order:
//
//   - Authorization: Bearer <key> (scheme case-insensitive)
//   - x-api-key
//   - x-goog-api-key
//
// Surrounding whitespace is trimmed, and an empty value falls through to
// the next header. An Authorization header with another scheme (such as
// Basic) is ignored. get looks up one header by name, like http.Header.Get;
// names are passed in lower case, as gRPC metadata requires.
func FromHeaders(get func(name string) string) string {
	if key := bearer(get("authorization")); key != "" {
		return key
	}
	for _, name := range []string{"x-api-key", "x-goog-api-key"} {
		if key := strings.TrimSpace(get(name)); key != "" {
			return key
		}
	}
	return ""
}

// bearer returns the token of a "Bearer <token>" credential, or "".
func bearer(auth string) string {
	auth = strings.TrimSpace(auth)
	i := strings.IndexAny(auth, " \t")
	if i < 0 || !strings.EqualFold(auth[:i], "bearer") {
		return ""
	}
	return strings.TrimSpace(auth[i+1:])
}

// checksum returns the first ChecksumLen lowercase hex characters of
// HMAC-SHA256(secret, machineID+keyID).
func checksum(secret []byte, machineID, keyID string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(machineID))
	mac.Write([]byte(keyID))
	return hex.EncodeToString(mac.Sum(nil)[:ChecksumLen/2])
}

func validKeyID(s string) bool {
	if len(s) != KeyIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}
