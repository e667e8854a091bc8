package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/logincli"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// claudeIdentity is the line Anthropic wants first in the system prompt of
// the requests a subscription token makes.
const claudeIdentity = "You are Claude Code, Anthropic's official CLI for Claude."

// fakeClaudeAuth is Anthropic's sign-in: an authorize page that shows the
// code#state to paste (as the hosted callback page does), and a token
// endpoint that reads JSON bodies only.
type fakeClaudeAuth struct {
	*httptest.Server
	mu        sync.Mutex
	challenge string
	redirect  string
	bodies    []map[string]string
}

func newFakeClaudeAuth(t *testing.T) *fakeClaudeAuth {
	f := &fakeClaudeAuth{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != fakeClientID || q.Get("code") != "true" || q.Get("code_challenge_method") != "S256" {
			http.Error(w, "bad authorize request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.challenge, f.redirect = q.Get("code_challenge"), q.Get("redirect_uri")
		f.mu.Unlock()
		if strings.HasPrefix(q.Get("redirect_uri"), "http://") {
			// A loopback callback gets the browser back.
			http.Redirect(w, r, q.Get("redirect_uri")+"?code="+fakeAuthCode+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, fakeAuthCode+"#"+q.Get("state"))
	})
	mux.HandleFunc("POST /v1/oauth/token", func(w http.ResponseWriter, r *http.Request) {
		var b map[string]string
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&b) != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.bodies = append(f.bodies, b)
		if b["client_id"] != fakeClientID || b["grant_type"] != "authorization_code" || b["code"] != fakeAuthCode ||
			oauth.Challenge(b["code_verifier"]) != f.challenge || b["redirect_uri"] != f.redirect || b["state"] == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "access_token": fakeAccess, "refresh_token": fakeRefresh, "expires_in": 28800})
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// fakeAnthropic is api.anthropic.com: it keeps what each Messages request
// carried and answers a short message.
type fakeAnthropic struct {
	*httptest.Server
	mu   sync.Mutex
	seen []anthropicSeen
}

type anthropicSeen struct {
	header http.Header
	body   map[string]json.RawMessage
}

func newFakeAnthropic(t *testing.T) *fakeAnthropic {
	a := &fakeAnthropic{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{map[string]any{"id": "claude-sonnet-4-6", "type": "model"}}, "has_more": false})
	})
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.seen = append(a.seen, anthropicSeen{header: r.Header.Clone(), body: body})
		a.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{
			"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
			"content":     []any{map[string]any{"type": "text", "text": "Hello."}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 9, "output_tokens": 2},
		})
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *fakeAnthropic) requests() []anthropicSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]anthropicSeen(nil), a.seen...)
}

// systemTexts are the texts of a Messages request's system blocks (a
// string system is one block).
func systemTexts(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(raw, &blocks), "system %s", raw)
	var out []string
	for _, b := range blocks {
		out = append(out, b.Text)
	}
	return out
}

// claudeServe is a serve instance whose claude login signs in at a fake
// authorization server and whose connections reach a fake Anthropic.
func claudeServe(t *testing.T) (*nodetest.Instance, *fakeClaudeAuth, *fakeAnthropic) {
	t.Helper()
	up := newFakeAnthropic(t)
	f := newFakeClaudeAuth(t)
	cfg := nodetest.Config(t.TempDir())
	cfg.OAuth = oauth.Overrides{"claude": {
		"client_id": fakeClientID, "authorize_url": f.URL + "/authorize", "token_url": f.URL + "/v1/oauth/token",
		"base_url": up.URL + "/v1",
	}}
	return nodetest.Start(t, cfg, node.AllRoles...), f, up
}

// A Claude Pro/Max subscription signed in with `switchboard login claude`
// (the code#state shown after the sign-in pasted back) serves Anthropic
// models to Messages, chat-completions and Responses clients: every request goes up with the subscription's token as a bearer
// token, the OAuth beta beside the client's, and Claude Code's identity
// line first in the system prompt, once, whoever the client.
func TestLoginCLIClaudeServesMessagesAndChat(t *testing.T) {
	sb, f, up := claudeServe(t)

	var out strings.Builder
	pr, pw := io.Pipe()
	defer pw.Close()
	c, err := logincli.Run(context.Background(), logincli.Options{
		URL: sb.BaseURL, AdminToken: nodetest.AdminToken, Provider: "claude", Out: &out, In: pr,
		// The "browser": the sign-in ends on a page showing the code to
		// paste, which the user types into the terminal.
		Open: func(u string) {
			resp, err := http.Get(u)
			page := ""
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				page = string(b)
			}
			go func() { _, _ = fmt.Fprintln(pw, page) }()
		},
	})
	require.NoError(t, err, out.String())
	assert.Equal(t, "claude", c.Provider)
	assert.Contains(t, out.String(), f.URL+"/authorize?")
	assert.Contains(t, out.String(), "Paste the code")
	f.mu.Lock()
	require.Len(t, f.bodies, 1)
	assert.Equal(t, "https://platform.claude.com/oauth/code/callback", f.bodies[0]["redirect_uri"])
	f.mu.Unlock()
	u, _ := url.Parse(c.BaseURL)
	require.NotNil(t, u)

	// Claude Code: its identity line already in the system prompt, after
	// its billing block, and betas of its own.
	msg := sb.Do(t, http.MethodPost, "/v1/messages", map[string]any{
		"model": "claude/claude-sonnet-4-6", "max_tokens": 64,
		"system": []any{
			map[string]any{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330; cc_entrypoint=cli;"},
			map[string]any{"type": "text", "text": claudeIdentity, "cache_control": map[string]any{"type": "ephemeral"}},
			map[string]any{"type": "text", "text": "Work in /repo."},
		},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	}, "anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14")
	require.Equal(t, http.StatusOK, msg.Status, "%s", msg.Body)

	// Another Messages client, with a system prompt of its own.
	other := sb.Do(t, http.MethodPost, "/v1/messages", map[string]any{
		"model": "claude/claude-sonnet-4-6", "max_tokens": 64, "system": "Answer briefly.",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	}, "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, other.Status, "%s", other.Body)

	// A chat-completions client, translated to Messages.
	chat := sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{
		"model": "claude/claude-sonnet-4-6",
		"messages": []any{
			map[string]any{"role": "system", "content": "Be terse."},
			map[string]any{"role": "user", "content": "hi"},
		},
	})
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
	assert.Contains(t, string(chat.Body), "Hello.")

	// A Responses client (Codex), translated to Messages.
	resp := sb.Do(t, http.MethodPost, "/v1/responses", map[string]any{
		"model": "claude/claude-sonnet-4-6", "instructions": "Edit carefully.", "input": "hi", "store": false,
	})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)

	seen := up.requests()
	require.Len(t, seen, 4)
	for i, s := range seen {
		assert.Equal(t, "Bearer "+fakeAccess, s.header.Get("Authorization"), "request %d", i)
		assert.Empty(t, s.header.Values("X-Api-Key"), "request %d: a subscription token is no API key", i)
		assert.Contains(t, strings.Split(s.header.Get("anthropic-beta"), ","), "oauth-2025-04-20", "request %d", i)
		assert.Equal(t, "2023-06-01", s.header.Get("anthropic-version"), "request %d", i)
		texts := systemTexts(t, s.body["system"])
		n := 0
		for _, x := range texts {
			if strings.HasPrefix(x, claudeIdentity) {
				n++
			}
		}
		assert.Equal(t, 1, n, "request %d: the identity line once in %q", i, texts)
		if i > 0 {
			require.NotEmpty(t, texts)
			assert.Equal(t, claudeIdentity, texts[0], "request %d: the identity line first", i)
		}
	}
	assert.Equal(t, "interleaved-thinking-2025-05-14,oauth-2025-04-20", seen[0].header.Get("anthropic-beta"), "the client's betas are kept")
	assert.Equal(t, []string{"x-anthropic-billing-header: cc_version=2.1.330; cc_entrypoint=cli;", claudeIdentity, "Work in /repo."},
		systemTexts(t, seen[0].body["system"]), "Claude Code's system prompt goes up as it came")
	assert.Equal(t, []string{claudeIdentity, "Answer briefly."}, systemTexts(t, seen[1].body["system"]))
	assert.Equal(t, []string{claudeIdentity, "Be terse."}, systemTexts(t, seen[2].body["system"]))
	assert.Equal(t, []string{claudeIdentity, "Edit carefully."}, systemTexts(t, seen[3].body["system"]))
	for _, s := range seen {
		assert.NotContains(t, string(s.body["system"]), fakeRefresh)
	}
}

// A loopback callback named as Claude Code names its own,
// http://localhost:<port>/callback, reaches the provider with its host as
// given (the port chosen when it is 0): a provider that registered
// "localhost" refuses "127.0.0.1".
func TestLoginCLIClaudeLoopbackKeepsLocalhost(t *testing.T) {
	sb, f, _ := claudeServe(t)
	var out strings.Builder
	browserErr := make(chan error, 1)
	c, err := logincli.Run(context.Background(), logincli.Options{
		URL: sb.BaseURL, AdminToken: nodetest.AdminToken, Provider: "claude", Out: &out,
		RedirectURI: "http://localhost:0/callback",
		Open: func(u string) {
			browserErr <- browse(u)
		},
	})
	require.NoError(t, err, out.String())
	require.NoError(t, <-browserErr)
	assert.Equal(t, "claude", c.Provider)
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.bodies, 1)
	ru, err := url.Parse(f.bodies[0]["redirect_uri"])
	require.NoError(t, err)
	assert.Equal(t, "localhost", ru.Hostname(), "redirect_uri %s", ru)
	assert.NotEqual(t, "0", ru.Port())
	assert.Equal(t, "/callback", ru.Path)
}

// The console's claude login: the sign-in ends on Anthropic's page, which
// shows the code#state to copy. The console asks for that code, naming
// that page, not for an address the browser lands on (Codex's loopback
// redirect), and the pasted code#state finishes the login.
func TestConsoleClaudeLogin(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, f, _ := claudeServe(t)
	mint := sb.Admin(t, http.MethodPost, "/api/console/sign-in-codes", map[string]any{})
	require.Equal(t, http.StatusCreated, mint.Status, "%s", mint.Body)
	b.GoTo(sb.BaseURL + "/ui/#/signin?code=" + mint.JSON["code"].(string))
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})

	b.Click("button", "Log in to claude")
	authorize := b.Do(map[string]any{"op": "attr", "role": "link", "name": "Open the claude sign-in page", "attr": "href"}).(string)
	require.True(t, strings.HasPrefix(authorize, f.URL+"/authorize?"), authorize)
	page := b.Text()
	assert.Contains(t, page, "paste the code it shows")
	assert.Contains(t, page, "https://platform.claude.com/oauth/code/callback shows it")
	assert.NotContains(t, page, "address your browser lands on")
	b.Do(map[string]any{"op": "wait", "role": "region", "name": "Log in to claude"})
	b.Shot("claude-login")

	resp, err := http.Get(authorize)
	require.NoError(t, err)
	shown, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(shown), "#", "the page shows code#state")
	b.Fill("Code", string(shown))
	b.Click("button", "Finish login")
	b.WaitText("Logged in: the connection claude was added.")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.bodies, 1)
	assert.Equal(t, "https://platform.claude.com/oauth/code/callback", f.bodies[0]["redirect_uri"])
}
