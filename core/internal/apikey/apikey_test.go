package apikey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef")
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
)

const (
	testMachine  = "0a1b2c3d4e5f6789"
	testKeyID    = "k3y9z0"
	testV2Secret = "Qm7TzR2vXc9LpA4nHs8WdK3yFb6JgE1u"
)

func TestNewMachineID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := NewMachineID()
		require.NoError(t, err)
		require.Truef(t, ValidMachineID(id), "invalid machine id %q", id)
		require.False(t, seen[id], "duplicate machine id")
		seen[id] = true
	}
}

func TestValidMachineID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"0123456789abcdef", true},
		{"0000000000000000", true},
		{"0123456789ABCDEF", false},
		{"0123456789abcdeg", false},
		{"0123456789abcde", false},
		{"0123456789abcdef0", false},
		{"", false},
		{"0123456789abcde ", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, ValidMachineID(tt.in))
		})
	}
}

func TestNewKeyID(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	for range 1000 {
		id, err := NewKeyID()
		require.NoError(t, err)
		require.Truef(t, validKeyID(id), "invalid key id %q", id)
		seen[id] = true
		for _, r := range id {
			counts[r]++
		}
	}
	// 36^6 ≈ 2.2e9 possibilities: collisions among 1000 are vanishingly rare.
	assert.Greater(t, len(seen), 990)
	// Every character of the alphabet should appear in 6000 draws.
	assert.Len(t, counts, len(keyIDAlphabet))
}

func TestFormat(t *testing.T) {
	key := Format(testSecret, testMachine, testKeyID)

	mac := hmac.New(sha256.New, testSecret)
	mac.Write([]byte(testMachine + testKeyID))
	wantCRC := hex.EncodeToString(mac.Sum(nil))[:8]

	assert.Equal(t, "sk-"+testMachine+"-"+testKeyID+"-"+wantCRC, key)
	assert.Equal(t, key, Format(testSecret, testMachine, testKeyID), "format must be deterministic")
	assert.NotEqual(t, key, Format(otherSecret, testMachine, testKeyID))
}

func TestParseRoundTrip(t *testing.T) {
	for i := range 20 {
		machine, err := NewMachineID()
		require.NoError(t, err)
		keyID, err := NewKeyID()
		require.NoError(t, err)
		raw := Format(testSecret, machine, keyID)

		got, err := Parse(testSecret, raw)
		require.NoErrorf(t, err, "iteration %d", i)
		assert.Equal(t, Key{MachineID: machine, KeyID: keyID, Version: Version1}, got)
	}
}

// replacePart returns key with its i-th dash-separated part replaced.
func replacePart(key string, i int, part string) string {
	parts := strings.Split(key, "-")
	parts[i] = part
	return strings.Join(parts, "-")
}

// flip changes the last character of s to a different character from the
// same class, so the result stays well-formed.
func flip(s string) string {
	last := s[len(s)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return s[:len(s)-1] + string(repl)
}

func TestParse(t *testing.T) {
	valid := Format(testSecret, testMachine, testKeyID)
	crc := strings.Split(valid, "-")[3]
	otherCRC := strings.Split(Format(testSecret, testMachine, "aaaaaa"), "-")[3]

	tests := []struct {
		name    string
		secret  []byte
		raw     string
		want    Key
		wantErr error
	}{
		{name: "valid", raw: valid, want: Key{MachineID: testMachine, KeyID: testKeyID, Version: Version1}},
		{name: "current", raw: "sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret, want: Key{MachineID: testMachine, KeyID: testKeyID, Version: Version2}},
		{name: "current, server secret irrelevant", secret: otherSecret, raw: "sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret, want: Key{MachineID: testMachine, KeyID: testKeyID, Version: Version2}},
		{name: "current, secret one short", raw: "sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret[1:], wantErr: ErrMalformed},
		{name: "current, secret one long", raw: "sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret + "a", wantErr: ErrMalformed},
		{name: "current, secret with symbol", raw: "sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret[1:] + "_", wantErr: ErrMalformed},
		{name: "current, upper-case machine id", raw: "sk-" + strings.ToUpper(testMachine) + "-" + testKeyID + "-" + testV2Secret, wantErr: ErrMalformed},
		{name: "wrong secret", secret: otherSecret, raw: valid, wantErr: ErrChecksum},
		{name: "empty secret", secret: []byte{}, raw: valid, wantErr: ErrChecksum},
		{name: "tampered machine id", raw: replacePart(valid, 1, flip(testMachine)), wantErr: ErrChecksum},
		{name: "tampered key id", raw: replacePart(valid, 2, flip(testKeyID)), wantErr: ErrChecksum},
		{name: "tampered crc", raw: replacePart(valid, 3, flip(crc)), wantErr: ErrChecksum},
		{name: "crc of another key", raw: replacePart(valid, 3, otherCRC), wantErr: ErrChecksum},

		{name: "upper-case machine id", raw: replacePart(valid, 1, strings.ToUpper(testMachine)), wantErr: ErrMalformed},
		{name: "upper-case key id", raw: replacePart(valid, 2, strings.ToUpper(testKeyID)), wantErr: ErrMalformed},
		{name: "upper-case crc", raw: replacePart(valid, 3, "ABCDEF01"), wantErr: ErrMalformed},
		{name: "non-hex machine id", raw: replacePart(valid, 1, "0a1b2c3d4e5f678g"), wantErr: ErrMalformed},
		{name: "short machine id", raw: replacePart(valid, 1, testMachine[1:]), wantErr: ErrMalformed},
		{name: "long machine id", raw: replacePart(valid, 1, testMachine+"0"), wantErr: ErrMalformed},
		{name: "short key id", raw: replacePart(valid, 2, testKeyID[1:]), wantErr: ErrMalformed},
		{name: "long key id", raw: replacePart(valid, 2, testKeyID+"a"), wantErr: ErrMalformed},
		{name: "key id with symbol", raw: replacePart(valid, 2, "k3y_z0"), wantErr: ErrMalformed},
		{name: "short crc", raw: replacePart(valid, 3, crc[1:]), wantErr: ErrMalformed},
		{name: "long crc", raw: replacePart(valid, 3, crc+"0"), wantErr: ErrMalformed},
		{name: "non-hex crc", raw: replacePart(valid, 3, "0000000g"), wantErr: ErrMalformed},

		{name: "empty string", raw: "", wantErr: ErrMalformed},
		{name: "prefix only", raw: "sk", wantErr: ErrMalformed},
		{name: "prefix and dash", raw: "sk-", wantErr: ErrMalformed},
		{name: "three parts", raw: "sk-" + testMachine + "-" + testKeyID, wantErr: ErrMalformed},
		{name: "five parts", raw: valid + "-00", wantErr: ErrMalformed},
		{name: "trailing dash", raw: valid + "-", wantErr: ErrMalformed},
		{name: "empty machine id", raw: "sk--" + testKeyID + "-" + crc, wantErr: ErrMalformed},
		{name: "empty key id", raw: "sk-" + testMachine + "--" + crc, wantErr: ErrMalformed},
		{name: "empty crc", raw: "sk-" + testMachine + "-" + testKeyID + "-", wantErr: ErrMalformed},
		{name: "all empty", raw: "---", wantErr: ErrMalformed},
		{name: "leading space", raw: " " + valid, wantErr: ErrMalformed},
		{name: "trailing newline", raw: valid + "\n", wantErr: ErrMalformed},

		{name: "non-sk prefix", raw: replacePart(valid, 0, "pk"), wantErr: ErrMalformed},
		{name: "upper-case prefix", raw: replacePart(valid, 0, "SK"), wantErr: ErrMalformed},
		{name: "empty prefix", raw: replacePart(valid, 0, ""), wantErr: ErrMalformed},
		{name: "bare legacy body", raw: "abcdEFGH1234", wantErr: ErrMalformed},

		{name: "legacy", raw: "sk-abcdEFGH1234", want: Key{Legacy: true}},
		{name: "legacy minimum length", raw: "sk-Abc12345", want: Key{Legacy: true}},
		{name: "legacy openai-like", raw: "sk-" + strings.Repeat("aZ9", 16), want: Key{Legacy: true}},
		{name: "legacy too short", raw: "sk-Abc1234", wantErr: ErrMalformed},
		{name: "legacy empty body", raw: "sk-", wantErr: ErrMalformed},
		{name: "legacy with underscore", raw: "sk-abcd_efgh", wantErr: ErrMalformed},
		{name: "legacy non-ascii", raw: "sk-abcdéfghij", wantErr: ErrMalformed},
		{name: "legacy wrong prefix", raw: "pk-abcdEFGH1234", wantErr: ErrMalformed},
		{name: "oversized", raw: "sk-" + strings.Repeat("a", MaxLen), wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := testSecret
			if tt.secret != nil {
				secret = tt.secret
			}
			got, err := Parse(secret, tt.raw)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Equal(t, Key{}, got)
				if len(tt.raw) > 3 {
					assert.NotContains(t, err.Error(), tt.raw, "error must not contain the key")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseErrorsAreDistinct(t *testing.T) {
	assert.False(t, errors.Is(ErrChecksum, ErrMalformed))
	assert.False(t, errors.Is(ErrMalformed, ErrChecksum))
}

func TestHash(t *testing.T) {
	raw := Format(testSecret, testMachine, testKeyID)
	h := Hash(raw)
	sum := sha256.Sum256([]byte(raw))
	assert.Equal(t, hex.EncodeToString(sum[:]), h)
	assert.Len(t, h, 64)
	assert.Equal(t, strings.ToLower(h), h)
	assert.NotContains(t, h, raw)
	assert.NotEqual(t, h, Hash(raw+"x"))
	assert.Equal(t,
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Hash(""))
}

func TestFromHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"none", nil, ""},
		{"bearer", map[string]string{"Authorization": "Bearer sk-abc"}, "sk-abc"},
		{"bearer lower case", map[string]string{"Authorization": "bearer sk-abc"}, "sk-abc"},
		{"bearer upper case", map[string]string{"Authorization": "BEARER sk-abc"}, "sk-abc"},
		{"bearer mixed case", map[string]string{"Authorization": "bEaReR sk-abc"}, "sk-abc"},
		{"bearer surrounding spaces", map[string]string{"Authorization": "  Bearer   sk-abc  "}, "sk-abc"},
		{"bearer tab", map[string]string{"Authorization": "Bearer\tsk-abc"}, "sk-abc"},
		{"bearer without token", map[string]string{"Authorization": "Bearer"}, ""},
		{"bearer with blank token", map[string]string{"Authorization": "Bearer   "}, ""},
		{"bearer glued to token", map[string]string{"Authorization": "Bearersk-abc"}, ""},
		{"basic ignored", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, ""},
		{"bare token ignored", map[string]string{"Authorization": "sk-abc"}, ""},
		{"x-api-key", map[string]string{"X-Api-Key": "sk-xapi"}, "sk-xapi"},
		{"x-api-key trimmed", map[string]string{"X-Api-Key": " sk-xapi \t"}, "sk-xapi"},
		{"x-goog-api-key", map[string]string{"X-Goog-Api-Key": "sk-goog"}, "sk-goog"},
		{"bearer beats x-api-key", map[string]string{
			"Authorization":  "Bearer sk-bearer",
			"X-Api-Key":      "sk-xapi",
			"X-Goog-Api-Key": "sk-goog",
		}, "sk-bearer"},
		{"x-api-key beats x-goog-api-key", map[string]string{
			"X-Api-Key":      "sk-xapi",
			"X-Goog-Api-Key": "sk-goog",
		}, "sk-xapi"},
		{"non-bearer falls through", map[string]string{
			"Authorization": "Basic dXNlcjpwYXNz",
			"X-Api-Key":     "sk-xapi",
		}, "sk-xapi"},
		{"empty bearer falls through", map[string]string{
			"Authorization":  "Bearer ",
			"X-Goog-Api-Key": "sk-goog",
		}, "sk-goog"},
		{"blank x-api-key falls through", map[string]string{
			"X-Api-Key":      "  ",
			"X-Goog-Api-Key": "sk-goog",
		}, "sk-goog"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// http.Header canonicalizes names, so lower-case lookups work.
			h := http.Header{}
			md := map[string]string{} // gRPC-style metadata: lower-case keys
			for k, v := range tt.headers {
				h.Set(k, v)
				md[strings.ToLower(k)] = v
			}
			assert.Equal(t, tt.want, FromHeaders(h.Get), "http.Header")
			assert.Equal(t, tt.want, FromHeaders(func(name string) string { return md[name] }), "metadata")
		})
	}
}

func FuzzParse(f *testing.F) {
	valid := Format(testSecret, testMachine, testKeyID)
	for _, seed := range []string{
		valid,
		Format(otherSecret, testMachine, testKeyID),
		replacePart(valid, 1, strings.ToUpper(testMachine)),
		"sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret,
		"sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret[2:] + "-_",
		"sk-abcdEFGH1234",
		"sk-",
		"sk",
		"",
		"---",
		"sk---",
		valid + "-",
		"pk-" + testMachine + "-" + testKeyID + "-00000000",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k, err := Parse(testSecret, raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrChecksum) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrChecksum", err)
			}
			if k != (Key{}) {
				t.Fatalf("non-zero key %+v returned with error", k)
			}
			return
		}
		if k.Legacy {
			if k.MachineID != "" || k.KeyID != "" || k.Version != VersionLegacy {
				t.Fatalf("legacy key has ids: %+v", k)
			}
			return
		}
		if !ValidMachineID(k.MachineID) || !validKeyID(k.KeyID) {
			t.Fatalf("parsed invalid ids: %+v", k)
		}
		switch k.Version {
		case Version1:
			if got := Format(testSecret, k.MachineID, k.KeyID); got != raw {
				t.Fatalf("re-formatted key %q differs from input %q", got, raw)
			}
		case Version2:
			// The machine id is derivable from the key: it is the key's
			// second part, and the rest is the key id and a full secret.
			want := Prefix + "-" + k.MachineID + "-" + k.KeyID + "-"
			if !strings.HasPrefix(raw, want) || len(raw) != len(want)+SecretLen || !isAlnum(raw[len(want):]) {
				t.Fatalf("current key %q does not have its parsed structure %+v", raw, k)
			}
			if LookupID(testSecret, raw) == Hash(raw) {
				t.Fatalf("current key stored under its plain hash")
			}
		default:
			t.Fatalf("unknown version %d", k.Version)
		}
	})
}

// New keys carry at least 128 bits of uniform randomness, and the machine
// id is still read from the key.
func TestNewCarries128Bits(t *testing.T) {
	bits := float64(SecretLen) * math.Log2(float64(len(secretAlphabet)))
	assert.GreaterOrEqual(t, bits, 128.0, "secret entropy in bits")

	seen := map[string]bool{}
	counts := map[byte]int{}
	for range 1000 {
		raw, k, err := New(testMachine)
		require.NoError(t, err)
		got, err := Parse(testSecret, raw)
		require.NoError(t, err)
		assert.Equal(t, k, got)
		assert.Equal(t, Version2, got.Version)
		assert.Equal(t, testMachine, got.MachineID, "the machine id is derivable from the key")
		secret := secretOf(t, raw)
		require.Len(t, secret, SecretLen)
		require.False(t, seen[secret], "duplicate secret")
		seen[secret] = true
		for i := 0; i < len(secret); i++ {
			counts[secret[i]]++
		}
	}
	// 32,000 draws over 62 characters: every character appears.
	assert.Len(t, counts, len(secretAlphabet))

	_, _, err := New("NOT-A-MACHINE")
	assert.ErrorIs(t, err, ErrMalformed)
}

// secretOf returns a current key's secret part.
func secretOf(t *testing.T, raw string) string {
	t.Helper()
	parts := strings.Split(raw, "-")
	require.Len(t, parts, 4)
	return parts[3]
}

// What the key store holds for a key (its lookup id and its record: key id
// and machine id) neither contains nor narrows the key's secret: an
// attacker holding it still has to search the whole secret space.
func TestStoredFormRevealsNoSecret(t *testing.T) {
	for range 200 {
		raw, k, err := New(testMachine)
		require.NoError(t, err)
		secret := secretOf(t, raw)
		stored := LookupID(testSecret, raw) + "\x00" + k.MachineID + "\x00" + k.KeyID

		// No 6-character piece of the secret appears in what is stored,
		// in either letter case (hex output is lower case).
		for i := 0; i+6 <= len(secret); i++ {
			piece := secret[i : i+6]
			require.NotContains(t, strings.ToLower(stored), strings.ToLower(piece), "stored form holds part of the secret")
		}
		// Everything the key carries besides its secret is in the record:
		// the unknown part is the whole secret.
		unknown := strings.TrimPrefix(raw, Prefix+"-"+k.MachineID+"-"+k.KeyID+"-")
		assert.Equal(t, secret, unknown)
		assert.GreaterOrEqual(t, float64(len(unknown))*math.Log2(float64(len(secretAlphabet))), 128.0)

		// The record is independent of the secret: another secret with the
		// same ids parses to the same structure but is stored elsewhere.
		other := Prefix + "-" + k.MachineID + "-" + k.KeyID + "-" + flipCase(secret)
		ko, err := Parse(testSecret, other)
		require.NoError(t, err)
		assert.Equal(t, k, ko)
		assert.NotEqual(t, LookupID(testSecret, raw), LookupID(testSecret, other))

		// The lookup id is keyed by the server secret: a copy of the key
		// store alone cannot even test a guess.
		assert.NotEqual(t, Hash(raw), LookupID(testSecret, raw))
		assert.NotEqual(t, LookupID(testSecret, raw), LookupID(otherSecret, raw))
	}
}

// flipCase swaps the case of the first letter of s.
func flipCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
			return string(b)
		case c >= 'A' && c <= 'Z':
			b[i] = c - 'A' + 'a'
			return string(b)
		}
	}
	b[0] = 'x'
	return string(b)
}

// Keys of every form get a lookup id keyed by the server secret, distinct
// from the plain hash earlier releases stored them under.
func TestLookupIDOfOlderKeys(t *testing.T) {
	for _, raw := range []string{Format(testSecret, testMachine, testKeyID), "sk-abcdEFGH1234"} {
		_, err := Parse(testSecret, raw)
		require.NoError(t, err)
		assert.NotEqual(t, Hash(raw), LookupID(testSecret, raw))
		assert.NotEqual(t, LookupID(otherSecret, raw), LookupID(testSecret, raw))
		assert.Len(t, LookupID(testSecret, raw), 64)
	}
}

func TestLookupMatchesLookupID(t *testing.T) {
	l := NewLookup(testSecret)
	other := NewLookup(otherSecret)
	v2, _, err := New(testMachine)
	require.NoError(t, err)
	keys := []string{
		v2,
		Format(testSecret, testMachine, testKeyID),
		"sk-legacyKey123",
		"",
		strings.Repeat("x", MaxLen+10), // longer than any key Parse accepts
		"sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret,
	}
	// Twice over, so the second round reuses pooled state: a key's bytes
	// must not reach the next key's id.
	for range 2 {
		for _, raw := range keys {
			assert.Equal(t, LookupID(testSecret, raw), l.ID(raw))
			assert.Equal(t, LookupID(otherSecret, raw), other.ID(raw))
		}
	}
}

func TestLookupConcurrent(t *testing.T) {
	l := NewLookup(testSecret)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				raw := "sk-" + strings.Repeat(string(rune('a'+g)), 8+i%40)
				if l.ID(raw) != LookupID(testSecret, raw) {
					t.Errorf("lookup id of %d/%d differs", g, i)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func BenchmarkLookupID(b *testing.B) {
	raw := "sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret
	b.Run("func", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = LookupID(testSecret, raw)
		}
	})
	b.Run("pooled", func(b *testing.B) {
		l := NewLookup(testSecret)
		b.ReportAllocs()
		for b.Loop() {
			_ = l.ID(raw)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	raw := "sk-" + testMachine + "-" + testKeyID + "-" + testV2Secret
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(testSecret, raw); err != nil {
			b.Fatal(err)
		}
	}
}
