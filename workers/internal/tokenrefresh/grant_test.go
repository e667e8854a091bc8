package tokenrefresh

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAnswer(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		ctype     string
		body      string
		tokens    Tokens
		code      string // OAuth error code of the *Error
		relogin   bool
		temporary bool
	}{
		{name: "json", status: 200, ctype: "application/json",
			body:   `{"access_token":"a","refresh_token":"r","expires_in":3600}`,
			tokens: Tokens{AccessToken: "a", RefreshToken: "r", ExpiresIn: time.Hour}},
		{name: "lifetime as a string", status: 200, body: `{"access_token":"a","expires_in":"60"}`,
			tokens: Tokens{AccessToken: "a", ExpiresIn: time.Minute}},
		{name: "lifetime null or junk", status: 200, body: `{"access_token":"a","expires_in":null,"x":1}`,
			tokens: Tokens{AccessToken: "a"}},
		{name: "negative lifetime ignored", status: 200, body: `{"access_token":"a","expires_in":-5}`,
			tokens: Tokens{AccessToken: "a"}},
		{name: "form encoded", status: 200, ctype: "application/x-www-form-urlencoded; charset=utf-8",
			body:   "access_token=a&refresh_token=r&expires_in=28800&token_type=bearer",
			tokens: Tokens{AccessToken: "a", RefreshToken: "r", ExpiresIn: 8 * time.Hour}},
		{name: "form encoded error", status: 200, ctype: "application/x-www-form-urlencoded",
			body: "error=invalid_grant&error_description=bad", code: "invalid_grant", relogin: true},
		{name: "invalid_grant 400", status: 400, body: `{"error":"invalid_grant"}`, code: "invalid_grant", relogin: true},
		{name: "invalid_grant 401", status: 401, body: `{"error":"invalid_grant"}`, code: "invalid_grant", relogin: true},
		{name: "error object code", status: 401, body: `{"error":{"code":"refresh_token_expired","message":"m"}}`,
			code: "refresh_token_expired", relogin: true},
		{name: "error object type only", status: 400, body: `{"error":{"type":"invalid_request_error"}}`,
			code: "invalid_request_error"},
		{name: "odd code is not echoed", status: 400, body: `{"error":"<script>steal(rt-123)</script>"}`, code: "unknown_error"},
		{name: "400 without a code", status: 400, body: `{}`},
		{name: "403 html", status: 403, body: `<html>forbidden</html>`},
		{name: "408", status: 408, body: ``, temporary: true},
		{name: "429", status: 429, body: `{"error":"slow_down"}`, code: "slow_down", temporary: true},
		{name: "502 html", status: 502, body: `<html>bad gateway</html>`, temporary: true},
		{name: "200 html", status: 200, body: `<html>portal</html>`, temporary: true},
		{name: "200 without access token", status: 200, body: `{"refresh_token":"r"}`, temporary: true},
		{name: "200 truncated json", status: 200, body: `{"access_token":"a"`, temporary: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tokens, err := ParseAnswer(tc.status, tc.ctype, []byte(tc.body))
			if tc.tokens.AccessToken != "" {
				require.NoError(t, err)
				assert.Equal(t, tc.tokens, tokens)
				return
			}
			var oe *Error
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tc.status, oe.Status)
			assert.Equal(t, tc.code, oe.Code)
			assert.Equal(t, tc.relogin, oe.Relogin(), "relogin")
			assert.Equal(t, tc.temporary, oe.Temporary(), "temporary")
			assert.NotContains(t, err.Error(), "rt-123")
		})
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"access_token":"a","refresh_token":"r","expires_in":3600}`,
		`{"error":"invalid_grant"}`, `{"error":{"code":1}}`, `{"expires_in":"1e400"}`,
		`access_token=a&expires_in=x`, `null`, `[]`,
	} {
		f.Add(200, "application/json", []byte(s))
		f.Add(400, "application/x-www-form-urlencoded", []byte(s))
	}
	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte) {
		tokens, err := ParseAnswer(status, ctype, body)
		if err == nil {
			if tokens.AccessToken == "" || status < 200 || status > 299 || tokens.ExpiresIn < 0 {
				t.Fatalf("accepted %d %q: %+v", status, body, tokens)
			}
			return
		}
		if oe, ok := err.(*Error); ok && oe.Relogin() && oe.Temporary() {
			t.Fatalf("both relogin and temporary: %v", err)
		}
		if len(err.Error()) > 200 {
			t.Fatalf("error text too long, may quote the body: %q", err.Error())
		}
	})
}
