package vault

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/secrets"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

func newVault(t *testing.T) *Vault {
	t.Helper()
	box, err := secrets.NewBox(bytes.Repeat([]byte{7}, secrets.KeySize))
	require.NoError(t, err)
	return New(box)
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"http://proxy.example:3128", "http://proxy.example:3128"},
		{"http://user:secret@proxy.example:3128", "http://user:***@proxy.example:3128"},
		{"socks5://user:p%40ss@10.0.0.1:1080", "socks5://user:***@10.0.0.1:1080"},
		{"http://tokenonly@proxy.example", "http://***@proxy.example"},
		{"http://user:@proxy.example", "http://user:***@proxy.example"},
		{"http://[::1]:namedport", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := RedactURL(tt.in)
			assert.Equal(t, tt.want, got)
			assert.NotContains(t, got, "secret")
			assert.NotContains(t, got, "tokenonly")
		})
	}
}

// A redacted proxy URL sent back with another host keeps the stored
// credentials; new ones, or another user's "***", are taken as sent.
func TestKeepRedacted(t *testing.T) {
	const stored = "http://user:s3cret@old.example:3128"
	for _, tt := range []struct{ edited, stored, want string }{
		{"http://user:***@new.example:3128", stored, "http://user:s3cret@new.example:3128"},
		{"http://user:fresh@new.example:3128", stored, "http://user:fresh@new.example:3128"},
		{"http://other:***@new.example:3128", stored, "http://other:***@new.example:3128"},
		{"http://***@new.example", "http://tok3n@old.example", "http://tok3n@new.example"},
		{"http://new.example:3128", stored, "http://new.example:3128"},
		{"http://user:***@new.example:3128", "", "http://user:***@new.example:3128"},
	} {
		got := KeepRedacted(tt.edited, tt.stored)
		assert.Equal(t, tt.want, strings.Replace(got, "%2A%2A%2A", "***", 1), tt.edited)
	}
}

func TestSealLegacyMovesTheProxyIntoTheSecrets(t *testing.T) {
	v := newVault(t)
	c := &busv1.Connection{Id: "c1", Data: &busv1.ProviderData{ProxyUrl: "http://u:pw-legacy@p:1"}}
	require.NoError(t, v.Seal(c, &busv1.Secrets{ApiKey: "sk-1"}))
	sec, err := v.Open(c)
	require.NoError(t, err)
	assert.Equal(t, "http://u:pw-legacy@p:1", ProxyURL(c, sec), "read in place before the move")

	changed, err := v.SealLegacy(c)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Empty(t, c.GetData().GetProxyUrl())
	assert.NotContains(t, string(c.GetSealedSecrets()), "pw-legacy")
	sec, err = v.Open(c)
	require.NoError(t, err)
	assert.Equal(t, "sk-1", sec.GetApiKey(), "other secrets kept")
	assert.Equal(t, "http://u:pw-legacy@p:1", ProxyURL(c, sec))

	changed, err = v.SealLegacy(c)
	require.NoError(t, err)
	assert.False(t, changed, "nothing left to move")
}

// Whatever URL an admin sends, its redacted form parses back with no
// password but "***" and no user name when it had no password.
func FuzzRedactURL(f *testing.F) {
	for _, seed := range []string{
		"http://user:secret@proxy:3128", "socks5://u:p%40ss@10.0.0.1:1080", "http://token@p", "http://p:1",
		"http://a:b@c:d@e", "http://%zz@p", "http://user:***@p", "http://[::1]:80", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := RedactURL(raw)
		if got == "" {
			return
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("redacted %q does not parse: %v", got, err)
		}
		if u.User == nil {
			return
		}
		if p, ok := u.User.Password(); ok && p != "***" {
			t.Fatalf("redacted %q keeps password %q", got, p)
		}
		if _, ok := u.User.Password(); !ok && u.User.Username() != "***" {
			t.Fatalf("redacted %q keeps a user name given without a password", got)
		}
	})
}
