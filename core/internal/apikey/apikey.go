// Package apikey creates, checks and extracts Switchboard gateway API keys.
//
// A key issued today has the form
//
//	sk-{machineId}-{keyId}-{secret}
//
// where machineId is 16 lowercase hex characters identifying the issuing
// machine (so the gateway finds the tenant from the key alone), keyId is 6
// random characters from [a-z0-9] that name the key in listings and usage,
// and secret is SecretLen characters drawn uniformly from [A-Za-z0-9]
// (SecretLen·log2(62) ≈ 190 bits). Only the secret authenticates; it is
// never stored, listed or logged. What is stored is the key's LookupID: an
// HMAC-SHA256 of the whole key under a server-side secret. Without that
// secret a copy of the key store reveals nothing about a key; with it,
// reversing a key still means a search over the secret's 190 bits, because
// the secret is uniformly random and HMAC-SHA256 is preimage resistant.
//
// Two older forms are still accepted, so keys already handed out keep
// working until they are revoked:
//
//   - sk-{machineId}-{keyId}-{crc} (Version 1), where crc is the first 8
//     lowercase hex characters of HMAC-SHA256(secret, machineId+keyId). Its
//     only secret is that checksum (32 bits), so no new key has this form.
//   - sk-{random}, with 8 or more characters from [A-Za-z0-9], reported as
//     Legacy (no machine id).
//
// Both older forms were stored under the plain SHA-256 of the key (Hash);
// core moves each to its LookupID the first time it is used.
package apikey

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"

	"github.com/switchboardhq/switchboard/internal/bearer"
)

const (
	// Prefix starts every key.
	Prefix = "sk"

	// MachineIDLen is the length of a machine id in characters.
	MachineIDLen = 16
	// KeyIDLen is the length of a key id in characters.
	KeyIDLen = 6
	// ChecksumLen is the length of a Version 1 key's checksum in characters.
	ChecksumLen = 8
	// SecretLen is the length of a current key's secret in characters of
	// [A-Za-z0-9]: 32 characters carry 32·log2(62) ≈ 190 bits.
	SecretLen = 32
	// LegacyMinLen is the minimum length of the random part of a legacy key.
	LegacyMinLen = 8
	// MaxLen bounds the length of any key Parse accepts, so that oversized
	// input is rejected before any further work.
	MaxLen = 256

	keyIDAlphabet  = "abcdefghijklmnopqrstuvwxyz0123456789"
	secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

	// lookupLabel separates the lookup HMAC from the Version 1 checksum,
	// which uses the same server secret: a checksum's input has no NUL.
	lookupLabel = "switchboard-api-key-lookup-v2\x00"
)

// Versions of the key format.
const (
	// VersionLegacy is sk-{random}, with no machine id.
	VersionLegacy = 0
	// Version1 is sk-{machineId}-{keyId}-{crc}: a 32-bit secret.
	Version1 = 1
	// Version2 is sk-{machineId}-{keyId}-{secret}: a 190-bit secret.
	Version2 = 2
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
	// Version is the key's format: VersionLegacy, Version1 or Version2.
	Version int
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
	id, err := randomString(keyIDAlphabet, KeyIDLen)
	if err != nil {
		return "", fmt.Errorf("apikey: generate key id: %w", err)
	}
	return id, nil
}

// New returns a new current-format key for machineID, which must be valid
// (ValidMachineID), and its parsed structure. The raw key is the only
// place its secret exists: store LookupID(raw), never raw.
func New(machineID string) (raw string, k Key, err error) {
	if !ValidMachineID(machineID) {
		return "", Key{}, fmt.Errorf("%w: machine id must be %d lowercase hex characters", ErrMalformed, MachineIDLen)
	}
	keyID, err := NewKeyID()
	if err != nil {
		return "", Key{}, err
	}
	secret, err := randomString(secretAlphabet, SecretLen)
	if err != nil {
		return "", Key{}, fmt.Errorf("apikey: generate secret: %w", err)
	}
	raw = Prefix + "-" + machineID + "-" + keyID + "-" + secret
	return raw, Key{MachineID: machineID, KeyID: keyID, Version: Version2}, nil
}

// randomString returns n characters drawn uniformly from alphabet (at most
// 256 characters) with crypto/rand.
func randomString(alphabet string, n int) (string, error) {
	// Rejection sampling: limit is the largest multiple of len(alphabet)
	// that fits in a byte, so accepting only bytes below it keeps the
	// distribution uniform.
	limit := 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", err
		}
		for _, c := range buf {
			if int(c) >= limit {
				continue
			}
			out = append(out, alphabet[int(c)%len(alphabet)])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// Format returns the Version 1 key for machineID and keyID, with its
// checksum under secret. No new key is issued in this form (its secret is
// 32 bits); it stays so that tests can build the keys issued before. It
// does not validate its inputs: a key built from malformed ids will not
// Parse.
func Format(secret []byte, machineID, keyID string) string {
	return Prefix + "-" + machineID + "-" + keyID + "-" + checksum(secret, machineID, keyID)
}

// Parse checks raw and returns its structure. The parts must be
// well-formed; a Version 1 key's checksum must match under secret. Parse
// does not authenticate a key: only finding its LookupID in the key store
// does.
//
// Errors wrap ErrMalformed or ErrChecksum and never contain raw.
func Parse(secret []byte, raw string) (Key, error) {
	if raw == "" {
		return Key{}, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(raw) > MaxLen {
		return Key{}, fmt.Errorf("%w: longer than %d characters", ErrMalformed, MaxLen)
	}
	// The parts of raw split at "-", on the stack (a key has at most four).
	var buf [4]string
	n := strings.Count(raw, "-") + 1
	rest := raw
	for i := 0; i < len(buf) && i < n; i++ {
		buf[i], rest, _ = strings.Cut(rest, "-")
	}
	parts := buf[:min(n, len(buf))]
	if parts[0] != Prefix {
		return Key{}, fmt.Errorf("%w: missing %q prefix", ErrMalformed, Prefix+"-")
	}
	switch n {
	case 2:
		if len(parts[1]) < LegacyMinLen || !isAlnum(parts[1]) {
			return Key{}, fmt.Errorf("%w: legacy key must have at least %d characters of [A-Za-z0-9]", ErrMalformed, LegacyMinLen)
		}
		return Key{Legacy: true, Version: VersionLegacy}, nil
	case 4:
		machineID, keyID, crc := parts[1], parts[2], parts[3]
		if !ValidMachineID(machineID) {
			return Key{}, fmt.Errorf("%w: machine id must be %d lowercase hex characters", ErrMalformed, MachineIDLen)
		}
		if !validKeyID(keyID) {
			return Key{}, fmt.Errorf("%w: key id must be %d characters of [a-z0-9]", ErrMalformed, KeyIDLen)
		}
		if len(crc) == SecretLen {
			if !isAlnum(crc) {
				return Key{}, fmt.Errorf("%w: secret must be %d characters of [A-Za-z0-9]", ErrMalformed, SecretLen)
			}
			return Key{MachineID: machineID, KeyID: keyID, Version: Version2}, nil
		}
		if len(crc) != ChecksumLen || !isLowerHex(crc) {
			return Key{}, fmt.Errorf("%w: checksum must be %d lowercase hex characters", ErrMalformed, ChecksumLen)
		}
		want := checksum(secret, machineID, keyID)
		if !hmac.Equal([]byte(crc), []byte(want)) {
			return Key{}, ErrChecksum
		}
		return Key{MachineID: machineID, KeyID: keyID, Version: Version1}, nil
	default:
		return Key{}, fmt.Errorf("%w: unexpected number of parts", ErrMalformed)
	}
}

// Hash returns the lowercase hex SHA-256 of raw: where earlier releases
// stored a key. The raw key itself is never stored.
func Hash(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

// LookupID returns the store key of raw: the lowercase hex HMAC-SHA256 of
// raw under secret. Keys of the older forms may still be stored under
// Hash(raw) until their first use.
func LookupID(secret []byte, raw string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(lookupLabel))
	mac.Write([]byte(raw))
	return hex.EncodeToString(mac.Sum(nil))
}

// Lookup computes LookupIDs under one secret for the request path: the
// keyed HMAC state (what hmac.New derives from the secret) is made once and
// reused, instead of derived again for every key checked. It is safe for
// concurrent use.
type Lookup struct {
	pool sync.Pool // of *lookupState
}

// lookupState is one reusable HMAC and its scratch space; between uses it
// holds nothing of a key (ID clears it).
type lookupState struct {
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// NewLookup returns a Lookup under secret.
func NewLookup(secret []byte) *Lookup {
	secret = bytes.Clone(secret)
	l := &Lookup{}
	l.pool.New = func() any {
		mac := hmac.New(sha256.New, secret)
		// The first Reset saves the keyed state, which every later Reset
		// restores (the hash's block buffer included).
		mac.Reset()
		return &lookupState{mac: mac, buf: make([]byte, 0, len(lookupLabel)+MaxLen)}
	}
	return l
}

// ID returns LookupID(secret, raw).
func (l *Lookup) ID(raw string) string {
	st := l.pool.Get().(*lookupState)
	st.buf = append(append(st.buf[:0], lookupLabel...), raw...)
	st.mac.Write(st.buf)
	sum := st.mac.Sum(st.sum[:0])
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum)
	// Nothing of the key stays in the pooled state.
	st.mac.Reset()
	clear(st.buf[:cap(st.buf)])
	if cap(st.buf) > len(lookupLabel)+MaxLen {
		st.buf = make([]byte, 0, len(lookupLabel)+MaxLen)
	}
	clear(st.sum[:])
	l.pool.Put(st)
	return string(out[:])
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
// Basic) is not read here; the gateway refuses one when no other header
// holds a key (bearer.NotBearer). get looks up one header by name, like http.Header.Get;
// names are passed in lower case, as gRPC metadata requires.
func FromHeaders(get func(name string) string) string {
	if key := bearer.Token(get("authorization")); key != "" {
		return key
	}
	for _, name := range []string{"x-api-key", "x-goog-api-key"} {
		if key := strings.TrimSpace(get(name)); key != "" {
			return key
		}
	}
	return ""
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
