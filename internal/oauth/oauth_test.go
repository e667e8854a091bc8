package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RFC 7636 appendix B.
func TestChallengeRFC7636AppendixB(t *testing.T) {
	assert.Equal(t, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", Challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"))
}

func TestNewVerifier(t *testing.T) {
	v := NewVerifier()
	assert.Len(t, v, 43, "RFC 7636 section 4.1: 43 to 128 characters")
	for _, r := range v {
		assert.True(t, r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r), "unreserved %q", r)
	}
	assert.NotEqual(t, v, NewVerifier())
}

func TestProvidersOverrides(t *testing.T) {
	ps, err := NewProviders(Overrides{"qwen": {"token_url": "http://127.0.0.1:1/token", "client_id": "c"}})
	require.NoError(t, err)
	q, ok := ps.Lookup("qwen")
	require.True(t, ok)
	assert.Equal(t, "http://127.0.0.1:1/token", q.TokenURL)
	assert.Equal(t, "c", q.ClientID)
	assert.True(t, q.PKCE)
	assert.Equal(t, []string{"github-copilot", "qwen", "kimi", "codex", "claude"}, ps.IDs())

	for name, o := range map[string]Overrides{
		"unknown provider": {"nope": {"token_url": "https://x"}},
		"unknown field":    {"qwen": {"colour": "blue"}},
		"not a URL":        {"kimi": {"device_url": "ftp://x"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewProviders(o)
			require.Error(t, err)
		})
	}
}

func TestOverridesFromEnv(t *testing.T) {
	assert.Equal(t, "SWITCHBOARD_OAUTH_GITHUB_COPILOT_COPILOT_TOKEN_URL", EnvName("github-copilot", "copilot_token_url"))
	env := map[string]string{
		"SWITCHBOARD_OAUTH_GITHUB_COPILOT_CLIENT_ID": "enterprise",
		"SWITCHBOARD_OAUTH_KIMI_BASE_URL":            "https://kimi.example",
	}
	o := OverridesFromEnv(func(k string) string { return env[k] })
	assert.Equal(t, Overrides{"github-copilot": {"client_id": "enterprise"}, "kimi": {"base_url": "https://kimi.example"}}, o)
}

func TestAuthorizeURL(t *testing.T) {
	ps, err := NewProviders(nil)
	require.NoError(t, err)
	p, _ := ps.Lookup("codex")
	u, err := url.Parse(AuthorizeURL(p, "st", "ch", "http://localhost:1455/auth/callback"))
	require.NoError(t, err)
	q := u.Query()
	assert.Equal(t, "code", q.Get("response_type"))
	assert.Equal(t, p.ClientID, q.Get("client_id"))
	assert.Equal(t, "st", q.Get("state"))
	assert.Equal(t, "ch", q.Get("code_challenge"))
	assert.Equal(t, "S256", q.Get("code_challenge_method"))
	assert.Equal(t, "http://localhost:1455/auth/callback", q.Get("redirect_uri"))
}

func TestPollTokenAnswers(t *testing.T) {
	var answer string
	var status int
	var form url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		form = r.PostForm
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	p := Provider{ClientID: "cid", TokenURL: srv.URL, TokenFormat: TokenForm}
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"pending as GitHub sends it (200)", `{"error":"authorization_pending"}`, 200, CodePending},
		{"slow down", `{"error":"slow_down","interval":10}`, 400, CodeSlowDown},
		{"expired", `{"error":"expired_token"}`, 400, CodeExpiredToken},
		{"denied", `{"error":"access_denied"}`, 400, CodeAccessDenied},
		{"server error", `oops`, 500, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer, status = tc.body, tc.status
			_, err := PollToken(context.Background(), srv.Client(), p, "dc", "ver")
			require.Error(t, err)
			assert.Equal(t, tc.code, ErrorCode(err))
		})
	}
	answer, status = `{"access_token":"at","refresh_token":"rt","expires_in":"3600","resource_url":"portal.qwen.ai"}`, 200
	tok, err := PollToken(context.Background(), srv.Client(), p, "dc", "ver")
	require.NoError(t, err)
	assert.Equal(t, Token{AccessToken: "at", RefreshToken: "rt", ExpiresIn: 3600, ResourceURL: "portal.qwen.ai"}, tok)
	assert.Equal(t, url.Values{"grant_type": {DeviceGrantType}, "device_code": {"dc"}, "client_id": {"cid"}, "code_verifier": {"ver"}}, form)
}
