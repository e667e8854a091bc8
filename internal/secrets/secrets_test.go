package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testKey(t *testing.T, fill byte) []byte {
	t.Helper()
	return bytes.Repeat([]byte{fill}, KeySize)
}

func newTestBox(t *testing.T, fill byte) *Box {
	t.Helper()
	b, err := NewBox(testKey(t, fill))
	require.NoError(t, err)
	return b
}

func TestBoxRoundTrip(t *testing.T) {
	box := newTestBox(t, 7)
	tests := []struct {
		name      string
		plaintext []byte
		aad       []byte
	}{
		{"empty", nil, nil},
		{"short", []byte("hello"), nil},
		{"with aad", []byte("provider-api-key"), []byte("provider:openai")},
		{"binary", bytes.Repeat([]byte{0, 0xff}, 1000), []byte{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sealed, err := box.Seal(tt.plaintext, tt.aad)
			require.NoError(t, err)
			assert.Len(t, sealed, len(tt.plaintext)+overhead)
			assert.Equal(t, version1, sealed[0])

			got, err := box.Open(sealed, tt.aad)
			require.NoError(t, err)
			assert.Equal(t, string(tt.plaintext), string(got))
		})
	}
}

func TestBoxSealUsesFreshNonce(t *testing.T) {
	box := newTestBox(t, 7)
	a, err := box.Seal([]byte("same"), nil)
	require.NoError(t, err)
	b, err := box.Seal([]byte("same"), nil)
	require.NoError(t, err)
	assert.NotEqual(t, a[1:1+nonceSize], b[1:1+nonceSize])
	assert.NotEqual(t, a, b)
}

func TestBoxTamperDetection(t *testing.T) {
	box := newTestBox(t, 7)
	plaintext := []byte("a secret value")
	aad := []byte("row-42")
	sealed, err := box.Seal(plaintext, aad)
	require.NoError(t, err)

	ctStart := 1 + nonceSize
	tagStart := len(sealed) - tagSize
	classes := []struct {
		name       string
		start, end int
	}{
		{"version", 0, 1},
		{"nonce", 1, ctStart},
		{"ciphertext", ctStart, tagStart},
		{"tag", tagStart, len(sealed)},
	}
	for _, c := range classes {
		t.Run(c.name, func(t *testing.T) {
			require.Less(t, c.start, c.end)
			for i := c.start; i < c.end; i++ {
				for _, mask := range []byte{0x01, 0x80} {
					tampered := bytes.Clone(sealed)
					tampered[i] ^= mask
					_, err := box.Open(tampered, aad)
					require.ErrorIsf(t, err, ErrTampered, "byte %d mask %#x", i, mask)
				}
			}
		})
	}

	t.Run("truncated", func(t *testing.T) {
		for n := 0; n < len(sealed); n++ {
			_, err := box.Open(sealed[:n], aad)
			require.ErrorIsf(t, err, ErrTampered, "length %d", n)
		}
	})

	t.Run("extended", func(t *testing.T) {
		_, err := box.Open(append(bytes.Clone(sealed), 0), aad)
		require.ErrorIs(t, err, ErrTampered)
	})

	t.Run("wrong aad", func(t *testing.T) {
		for _, wrong := range [][]byte{nil, []byte("row-43"), []byte("row-42 ")} {
			_, err := box.Open(sealed, wrong)
			require.ErrorIs(t, err, ErrTampered)
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		_, err := newTestBox(t, 8).Open(sealed, aad)
		require.ErrorIs(t, err, ErrTampered)
	})

	t.Run("error does not leak plaintext", func(t *testing.T) {
		_, err := newTestBox(t, 8).Open(sealed, aad)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), string(plaintext))
	})

	// The original must still open after all of the above.
	got, err := box.Open(sealed, aad)
	require.NoError(t, err)
	assert.Equal(t, plaintext, got)
}

func TestNewBoxKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		_, err := NewBox(make([]byte, n))
		assert.Errorf(t, err, "key size %d", n)
	}
	_, err := NewBox(make([]byte, KeySize))
	assert.NoError(t, err)
}

func TestParseKey(t *testing.T) {
	key := make([]byte, KeySize)
	for i := range key {
		// Include bytes that map to '+', '/', '-' and '_' in base64.
		key[i] = byte(i*37 + 0xf8)
	}
	good := []struct {
		name string
		in   string
	}{
		{"std padded", base64.StdEncoding.EncodeToString(key)},
		{"std raw", base64.RawStdEncoding.EncodeToString(key)},
		{"url padded", base64.URLEncoding.EncodeToString(key)},
		{"url raw", base64.RawURLEncoding.EncodeToString(key)},
		{"surrounding whitespace", "  " + base64.StdEncoding.EncodeToString(key) + "\n"},
	}
	require.NotEqual(t, good[0].in, good[2].in, "test key should exercise alphabet differences")
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.in)
			require.NoError(t, err)
			assert.Equal(t, key, got)
		})
	}

	bad := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"whitespace", "   \n"},
		{"short", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("s"), 31))},
		{"long", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("l"), 33))},
		{"16 bytes", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 16))},
		{"not base64", "this is definitely not base64 key material!!"},
		{"mixed alphabets", strings.Replace(base64.StdEncoding.EncodeToString(key), "A", "-", 1) + "/"},
		{"hex", strings.Repeat("ab", KeySize)},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.in)
			require.Error(t, err)
			assert.Nil(t, got)
			if trimmed := strings.TrimSpace(tt.in); trimmed != "" {
				assert.NotContains(t, err.Error(), trimmed, "error must not echo the input")
			}
		})
	}
}

func TestDerive(t *testing.T) {
	master := testKey(t, 1)
	a := Derive(master, "api-key-checksum")
	b := Derive(master, "provider-credentials")
	assert.Len(t, a, 32)
	assert.Len(t, b, 32)
	assert.NotEqual(t, a, b, "distinct purposes must give distinct keys")
	assert.NotEqual(t, master, a)
	assert.Equal(t, a, Derive(master, "api-key-checksum"), "derivation must be deterministic")
	assert.NotEqual(t, a, Derive(testKey(t, 2), "api-key-checksum"), "distinct masters must give distinct keys")

	// Derived keys are usable as Box keys.
	_, err := NewBox(a)
	assert.NoError(t, err)
}

func TestNewKeyText(t *testing.T) {
	text, err := NewKeyText()
	require.NoError(t, err)
	assert.Len(t, text, 44)
	key, err := ParseKey(string(text))
	require.NoError(t, err)
	assert.Len(t, key, KeySize)

	other, err := NewKeyText()
	require.NoError(t, err)
	assert.NotEqual(t, text, other)
}

func TestNewToken(t *testing.T) {
	tok, err := NewToken()
	require.NoError(t, err)
	s := string(tok)
	require.True(t, strings.HasPrefix(s, TokenPrefix), "token %q lacks prefix", s)
	body := strings.TrimPrefix(s, TokenPrefix)
	assert.Len(t, body, 43)
	raw, err := base64.RawURLEncoding.DecodeString(body)
	require.NoError(t, err)
	assert.Len(t, raw, 32)

	other, err := NewToken()
	require.NoError(t, err)
	assert.NotEqual(t, tok, other)
}

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "state")
	path := filepath.Join(dir, "master.key")

	calls := 0
	gen := func() ([]byte, error) {
		calls++
		return NewKeyText()
	}

	first, created, err := LoadOrCreate(path, gen)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, 1, calls)
	_, err = ParseKey(string(first))
	require.NoError(t, err)

	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	}

	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(first)+"\n", string(onDisk))

	second, created, err := LoadOrCreate(path, gen)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, 1, calls, "generate must not be called when the file exists")
	assert.Equal(t, first, second)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "temporary files must be cleaned up")
}

func TestLoadOrCreateExistingFileTrimmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("sbadm_abc \r\n\n"), 0o600))
	data, created, err := LoadOrCreate(path, func() ([]byte, error) {
		t.Fatal("generate must not be called")
		return nil, nil
	})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, "sbadm_abc", string(data))
}

func TestLoadOrCreateErrors(t *testing.T) {
	t.Run("generate fails", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "key")
		boom := errors.New("boom")
		_, created, err := LoadOrCreate(path, func() ([]byte, error) { return nil, boom })
		require.ErrorIs(t, err, boom)
		assert.False(t, created)
		_, statErr := os.Stat(path)
		assert.ErrorIs(t, statErr, os.ErrNotExist)
	})
	t.Run("generate returns empty", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "key")
		_, _, err := LoadOrCreate(path, func() ([]byte, error) { return []byte("\n"), nil })
		require.Error(t, err)
		_, statErr := os.Stat(path)
		assert.ErrorIs(t, statErr, os.ErrNotExist)
	})
	t.Run("existing file empty", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "key")
		require.NoError(t, os.WriteFile(path, []byte(" \n"), 0o600))
		_, _, err := LoadOrCreate(path, NewKeyText)
		require.Error(t, err)
	})
	t.Run("path is a directory", func(t *testing.T) {
		_, _, err := LoadOrCreate(t.TempDir(), NewKeyText)
		require.Error(t, err)
	})
}

func TestLoadOrCreateRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared", "token")
	const n = 16
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([][]byte, n)
		created = make([]bool, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], created[i], errs[i] = LoadOrCreate(path, NewToken)
		})
	}
	close(start)
	wg.Wait()

	winners := 0
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, string(results[0]), string(results[i]))
		if created[i] {
			winners++
		}
	}
	assert.Equal(t, 1, winners, "exactly one caller must create the file")

	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(results[0])+"\n", string(onDisk))

	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "temporary files must be cleaned up")
}

func TestRedact(t *testing.T) {
	body := []byte(`{"error":{"message":"Incorrect API key provided: sk-live-1234. Check sk-live-1234"}}`)
	got := string(Redact(body, "sk-live-1234"))
	if strings.Contains(got, "sk-live-1234") || strings.Count(got, "[redacted]") != 2 {
		t.Fatalf("not redacted: %s", got)
	}
	if string(Redact(body, "abc")) != string(body) {
		t.Fatal("a secret too short to be safe to match changed the text")
	}
	if string(Redact(body, "not-there")) != string(body) {
		t.Fatal("text without the secret changed")
	}
}

// jsonStrings is every string value and object key a JSON parser reads
// of doc.
func jsonStrings(t *testing.T, doc []byte) []string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(doc, &v), "%s", doc)
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				out = append(out, k)
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// escapeAll is s with every character written as a JSON \u escape.
func escapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// A JSON body is redacted in what a parser reads of it: the secret goes
// however its characters are escaped (\u0073, \/), in values and in
// object keys, and in a string that is itself a JSON document.
func TestRedactEscapedInJSON(t *testing.T) {
	const secret = "sk-FAKE/Slash+Key/0123"
	slashed := strings.ReplaceAll(secret, "/", `\/`)
	nested, err := json.Marshal(`{"detail":"key ` + escapeAll(secret) + `"}`)
	require.NoError(t, err)
	bodies := map[string]string{
		`\u escapes`:  `{"error":{"message":"Incorrect API key provided: ` + escapeAll(secret) + `.","code":"invalid_api_key"}}`,
		`\/ escapes`:  `{"error":{"message":"Incorrect API key provided: ` + slashed + `.","code":"invalid_api_key"}}`,
		`one escape`:  `{"error":{"message":"Incorrect API key provided: \u0073` + secret[1:] + `.","code":"invalid_api_key"}}`,
		`object key`:  `{"error":{"` + escapeAll(secret) + `":"Incorrect API key provided: [x].","code":"invalid_api_key"}}`,
		`nested JSON`: `{"error":{"message":"Incorrect API key provided: ` + slashed + `.","raw":` + string(nested) + `}}`,
		`array`:       ` [{"message":"Incorrect API key provided: ` + slashed + `."}] `,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			got := Redact([]byte(body), secret)
			require.True(t, json.Valid(got), "%s", got)
			redacted := false
			var walk func(doc []byte)
			walk = func(doc []byte) {
				for _, s := range jsonStrings(t, doc) {
					assert.NotContains(t, s, secret, "%s", got)
					redacted = redacted || strings.Contains(s, "[redacted]")
					if json.Valid([]byte(s)) && strings.ContainsAny(s, "{[") {
						walk([]byte(s))
					}
				}
			}
			walk(got)
			assert.True(t, redacted, "%s", got)
			if strings.Contains(body, `"code"`) {
				assert.Contains(t, string(got), `"code":"invalid_api_key"`, "the rest as the upstream wrote it")
			}
		})
	}
}

// A JSON body is changed only where the secret was: the other strings keep
// their escapes, and a body without the secret is returned as it came.
func TestRedactKeepsJSONBytes(t *testing.T) {
	const secret = "sk-FAKE/Slash+Key/0123"
	clean := "{ \"error\" : {\"message\":\"See https:\\/\\/example.com \\u00e9\\u003c\", \"n\": 1.50e3 } }\n"
	assert.Equal(t, clean, string(Redact([]byte(clean), secret)))

	body := `{"a":"https:\/\/example.com \u00e9","b":"key ` + escapeAll(secret) + ` <&>","c":1.50e3}`
	assert.Equal(t, `{"a":"https:\/\/example.com \u00e9","b":"key [redacted] <&>","c":1.50e3}`, string(Redact([]byte(body), secret)))

	plain := `{"a":"https:\/\/example.com","b":"key ` + secret + `","c":1.50e3}`
	assert.Equal(t, `{"a":"https:\/\/example.com","b":"key [redacted]","c":1.50e3}`, string(Redact([]byte(plain), secret)))
}

// Each data line of a stream that is JSON is redacted as a JSON body is;
// the event lines and the rest stay as they came.
func TestRedactEscapedInStream(t *testing.T) {
	const secret = "sk-FAKE/Slash+Key/0123"
	stream := "event: message_start\ndata: {\"type\":\"message_start\"}\n\n" +
		"event: error\r\ndata: {\"type\":\"error\",\"error\":{\"message\":\"bad key " + escapeAll(secret) + "\"}}\r\n\r\n" +
		"data: [DONE]\n\n"
	got := string(Redact([]byte(stream), secret))
	assert.Equal(t, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"+
		"event: error\r\ndata: {\"type\":\"error\",\"error\":{\"message\":\"bad key [redacted]\"}}\r\n\r\n"+
		"data: [DONE]\n\n", got)
}

// A body that is not JSON has the secret replaced where it stands, as it
// is and URL-encoded.
func TestRedactText(t *testing.T) {
	const secret = "sk-FAKE/Slash+Key/0123"
	body := "<html>bad key " + secret + " in /v1?key=" + url.QueryEscape(secret) + " or /" + url.PathEscape(secret) + "</html>"
	got := string(Redact([]byte(body), secret))
	assert.Equal(t, "<html>bad key [redacted] in /v1?key=[redacted] or /[redacted]</html>", got)
}

// A JSON body cut short (an error answer past the gateway's read limit) or
// nested past what encoding/json takes is not valid JSON, yet a client's
// lenient parser, or a person, reads its strings: an escaped secret in them
// goes too.
func TestRedactEscapedInJSONThatIsNotValid(t *testing.T) {
	const secret = "sk-FAKE/Slash+Key/0123"
	deep := strings.Repeat("[", 10001) + `"key ` + escapeAll(secret) + `"` + strings.Repeat("]", 10001)
	for name, body := range map[string]string{
		"cut short": `{"error":{"message":"Incorrect API key provided: ` + escapeAll(secret) + `.","type":"invalid_requ`,
		"too deep":  deep,
		"slashes":   `{"error":{"message":"key ` + strings.ReplaceAll(secret, "/", `\/`) + `","more":[1,2`,
	} {
		t.Run(name, func(t *testing.T) {
			got := string(Redact([]byte(body), secret))
			assert.Contains(t, got, "[redacted]")
			assert.NotContains(t, got, escapeAll(secret))
			assert.NotContains(t, got, strings.ReplaceAll(secret, "/", `\/`))
			assert.NotContains(t, got, secret)
		})
	}
}

// A refresh failure's reason keeps the workers' words, the status and an
// OAuth error code, and hides what of the connection's secrets a token
// endpoint put in its code: a secret whole, or the 64 characters of one a
// code is cut to, alone or after words of the endpoint's own; a run
// sharing fewer than 8 characters with a secret stays.
func TestHideRuns(t *testing.T) {
	long := "rt_" + strings.Repeat("a1B2c3D4", 12)
	for _, tc := range []struct{ reason, want string }{
		{"refresh token refused: token endpoint answered 400 (invalid_grant); sign in again",
			"refresh token refused: token endpoint answered 400 (invalid_grant); sign in again"},
		{"token refresh failed: token endpoint answered 400 (rt-one-0a93fe)",
			"token refresh failed: token endpoint answered 400 ([hidden])"},
		{"token refresh failed: token endpoint answered 400 (" + long[:64] + ")",
			"token refresh failed: token endpoint answered 400 ([hidden])"},
		{"é at-acc (at-access-1234)", "é at-acc ([hidden])"},
		{"token refresh failed: token endpoint answered 400 (bad.rt-one-0a93fe)",
			"token refresh failed: token endpoint answered 400 ([hidden])"},
		{"token refresh failed: token endpoint answered 400 (invalid_" + long[:56] + ")",
			"token refresh failed: token endpoint answered 400 ([hidden])"},
	} {
		assert.Equal(t, tc.want, HideRuns(tc.reason, "at-access-1234", "rt-one-0a93fe", long, ""))
	}
}
