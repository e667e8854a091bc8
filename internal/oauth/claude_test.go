package oauth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The claude login is Claude Code's: its public client, PKCE, the
// authorize URL's code=true, and the provider-hosted callback whose page
// shows the code to paste.
func TestClaudeAuthorizeURL(t *testing.T) {
	ps, err := NewProviders(nil)
	require.NoError(t, err)
	p, ok := ps.Lookup("claude")
	require.True(t, ok, "claude is in the login table")
	assert.Equal(t, FlowAuthorizationCode, p.Flow)
	assert.True(t, p.PKCE)
	assert.Equal(t, TokenJSON, p.TokenFormat)
	assert.Equal(t, RefreshGrant, RefreshMethodOf("claude"))
	assert.Equal(t, TokenJSON, TokenFormatOf("claude"))
	assert.Equal(t, TokenForm, TokenFormatOf("codex"))

	u, err := url.Parse(AuthorizeURL(p, "st", "ch", p.RedirectURI))
	require.NoError(t, err)
	q := u.Query()
	assert.Equal(t, "true", q.Get("code"))
	assert.Equal(t, "9d1c250a-e61b-44d9-88ed-5944d1962f5e", q.Get("client_id"))
	assert.Equal(t, "org:create_api_key user:profile user:inference", q.Get("scope"))
	assert.Equal(t, "S256", q.Get("code_challenge_method"))
	assert.Equal(t, "st", q.Get("state"))
	assert.Equal(t, "https://platform.claude.com/oauth/code/callback", q.Get("redirect_uri"))
}

// Anthropic's token endpoint takes the code exchange as a JSON body, with
// the state.
func TestClaudeExchangeCodeSendsJSON(t *testing.T) {
	var ctype string
	var body map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctype = r.Header.Get("Content-Type")
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"sk-ant-oat01-a","refresh_token":"sk-ant-ort01-r","expires_in":28800,"token_type":"Bearer"}`)
	}))
	defer srv.Close()
	ps, err := NewProviders(Overrides{"claude": {"token_url": srv.URL}})
	require.NoError(t, err)
	p, _ := ps.Lookup("claude")
	tok, err := ExchangeCode(context.Background(), srv.Client(), p, "the-code", "ver", p.RedirectURI, "st")
	require.NoError(t, err)
	assert.Equal(t, Token{AccessToken: "sk-ant-oat01-a", RefreshToken: "sk-ant-ort01-r", ExpiresIn: 28800}, tok)
	assert.Equal(t, "application/json", ctype)
	assert.Equal(t, map[string]string{
		"grant_type": "authorization_code", "code": "the-code", "code_verifier": "ver", "state": "st",
		"client_id": p.ClientID, "redirect_uri": "https://platform.claude.com/oauth/code/callback",
	}, body)
}
