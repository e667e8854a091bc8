package oauth

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func jwt(payload string) string {
	return "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
}

func TestProviderValues(t *testing.T) {
	p := Provider{Claims: map[string][]string{"chatgpt_account_id": {"https://api.openai.com/auth", "chatgpt_account_id"}}}
	named := jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-1"}}`)
	for _, tc := range []struct {
		name string
		tok  Token
		want map[string]string
	}{
		{"id_token", Token{IDToken: named, AccessToken: "opaque"}, map[string]string{"chatgpt_account_id": "acct-1"}},
		{"access token when no id_token", Token{AccessToken: named}, map[string]string{"chatgpt_account_id": "acct-1"}},
		{"id_token wins", Token{IDToken: named, AccessToken: jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-2"}}`)}, map[string]string{"chatgpt_account_id": "acct-1"}},
		{"claim missing", Token{IDToken: jwt(`{"sub":"x"}`)}, nil},
		{"not a string", Token{IDToken: jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":7}}`)}, nil},
		{"too long", Token{IDToken: jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"` + strings.Repeat("a", 300) + `"}}`)}, nil},
		{"line break", Token{AccessToken: jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-1\r\nX-Evil: 1"}}`)}, nil},
		{"space", Token{AccessToken: jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"acct 1"}}`)}, nil},
		{"not ascii", Token{AccessToken: jwt(`{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-é"}}`)}, nil},
		{"not a jwt", Token{IDToken: "a.b", AccessToken: "opaque"}, nil},
		{"bad base64", Token{IDToken: "x.!!!.y"}, nil},
		{"bad json", Token{IDToken: jwt(`{`)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, p.Values(tc.tok))
		})
	}
	assert.Nil(t, Provider{}.Values(Token{IDToken: named}), "no claims asked for")
}

func FuzzClaim(f *testing.F) {
	f.Add(jwt(`{"a":{"b":"c"}}`))
	f.Add("..")
	f.Fuzz(func(t *testing.T, s string) {
		_ = claim(s, []string{"a", "b"})
	})
}
