package node_test

import (
	"bytes"
	"cmp"
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
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/logincli"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Values the fake authorization server hands out, distinctive so a leak
// would be caught.
const (
	fakeClientID  = "fake-client-7c1"
	fakeUserCode  = "WDJB-MJHT"
	fakeAccess    = "at-login-4f2a90"
	fakeRefresh   = "rt-login-81bc3e"
	fakeCopilot   = "cop-token-d07e55"
	fakeAuthCode  = "ac-code-19e0f4"
	fakeAccountID = "acct-7d1e9c20"
	// fakeIDToken is an id_token naming the ChatGPT account and its user
	// as OpenAI's does (header {"alg":"none"}, claims
	// {"https://api.openai.com/auth": {"chatgpt_account_id": fakeAccountID,
	// "chatgpt_user_id": "user-5b03e7"}}, no signature).
	fakeIDToken     = "eyJhbGciOiJub25lIn0.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9hY2NvdW50X2lkIjoiYWNjdC03ZDFlOWMyMCIsImNoYXRncHRfdXNlcl9pZCI6InVzZXItNWIwM2U3In19.sig"
	pollOK          = "ok"
	fakeCopilotLife = 25 * time.Minute
)

// fakeAuthServer is an OAuth authorization server: device authorization
// (RFC 8628) with PKCE, device-code polls answered from a script, the
// authorization-code grant with PKCE, and GitHub's Copilot token exchange.
type fakeAuthServer struct {
	*httptest.Server
	t *testing.T

	mu sync.Mutex
	// challenges are the PKCE challenges of device codes and authorization
	// codes.
	challenges map[string]string
	redirects  map[string]string
	// script answers the device-code polls in turn (the last repeats):
	// an OAuth error code or pollOK.
	script     []string
	polls      int
	tokenForms []url.Values
	// resourceURL is sent with the tokens when set (Qwen).
	resourceURL string
	// copilotAPI is the endpoints.api of Copilot tokens.
	copilotAPI string
	copilotHit int
	// gate, when set, holds device-code polls until closed; polled gets a
	// value as each one arrives.
	gate   chan struct{}
	polled chan struct{}
	n      int
	// codeLife is the device codes' expires_in (zero: 900 s).
	codeLife int
	// deny makes the authorize step play a user who declines: the
	// redirect carries error=access_denied and the state, no code.
	deny bool
	// access and idToken, when set, are the tokens a login is handed
	// instead of fakeAccess and fakeIDToken.
	access, idToken string
	// refuseRefresh answers refresh grants invalid_grant, as a provider
	// that revoked the login does (else they are unsupported).
	refuseRefresh bool
}

func newFakeAuthServer(t *testing.T, script ...string) *fakeAuthServer {
	t.Helper()
	f := &fakeAuthServer{t: t, challenges: map[string]string{}, redirects: map[string]string{}, script: script, polled: make(chan struct{}, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /device/code", f.deviceCode)
	mux.HandleFunc("POST /token", f.token)
	mux.HandleFunc("GET /authorize", f.authorize)
	mux.HandleFunc("GET /copilot_internal/v2/token", f.copilotToken)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": code})
}

func (f *fakeAuthServer) deviceCode(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil || r.PostForm.Get("client_id") != fakeClientID {
		oauthError(w, "invalid_client")
		return
	}
	f.mu.Lock()
	f.n++
	dc := fmt.Sprintf("dc-%d", f.n)
	if ch := r.PostForm.Get("code_challenge"); ch != "" {
		if r.PostForm.Get("code_challenge_method") != "S256" {
			f.mu.Unlock()
			oauthError(w, "invalid_request")
			return
		}
		f.challenges[dc] = ch
	}
	life := cmp.Or(f.codeLife, 900)
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code": dc, "user_code": fakeUserCode,
		"verification_uri": f.URL + "/device", "verification_uri_complete": f.URL + "/device?user_code=" + fakeUserCode,
		"expires_in": life, "interval": 1,
	})
}

func (f *fakeAuthServer) tokens() map[string]any {
	body := map[string]any{"access_token": cmp.Or(f.access, fakeAccess), "refresh_token": fakeRefresh, "token_type": "Bearer", "expires_in": 3600,
		"id_token": cmp.Or(f.idToken, fakeIDToken)}
	if f.resourceURL != "" {
		body["resource_url"] = f.resourceURL
	}
	return body
}

func (f *fakeAuthServer) token(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil || r.PostForm.Get("client_id") != fakeClientID {
		oauthError(w, "invalid_client")
		return
	}
	form := r.PostForm
	f.mu.Lock()
	f.tokenForms = append(f.tokenForms, form)
	f.mu.Unlock()
	switch form.Get("grant_type") {
	case oauth.DeviceGrantType:
		f.mu.Lock()
		gate := f.gate
		f.mu.Unlock()
		f.polled <- struct{}{}
		if gate != nil {
			<-gate
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if ch, ok := f.challenges[form.Get("device_code")]; ok && oauth.Challenge(form.Get("code_verifier")) != ch {
			oauthError(w, "invalid_grant")
			return
		}
		f.polls++
		answer := f.script[0]
		if len(f.script) > 1 {
			f.script = f.script[1:]
		}
		if answer != pollOK {
			oauthError(w, answer)
			return
		}
		writeJSON(w, http.StatusOK, f.tokens())
	case "authorization_code":
		f.mu.Lock()
		defer f.mu.Unlock()
		code := form.Get("code")
		ch, ok := f.challenges[code]
		if !ok || oauth.Challenge(form.Get("code_verifier")) != ch || f.redirects[code] != form.Get("redirect_uri") {
			oauthError(w, "invalid_grant")
			return
		}
		delete(f.challenges, code)
		writeJSON(w, http.StatusOK, f.tokens())
	case "refresh_token":
		f.mu.Lock()
		refuse := f.refuseRefresh
		f.mu.Unlock()
		if refuse {
			oauthError(w, "invalid_grant")
			return
		}
		oauthError(w, "unsupported_grant_type")
	default:
		oauthError(w, "unsupported_grant_type")
	}
}

// authorize plays the user's consent: it issues a code bound to the PKCE
// challenge and redirects back with the state.
func (f *fakeAuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != fakeClientID || q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" {
		http.Error(w, "bad authorize request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if f.deny {
		f.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?error=access_denied&error_description=The+user+declined&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
		return
	}
	f.challenges[fakeAuthCode] = q.Get("code_challenge")
	f.redirects[fakeAuthCode] = q.Get("redirect_uri")
	f.mu.Unlock()
	http.Redirect(w, r, q.Get("redirect_uri")+"?code="+fakeAuthCode+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
}

func (f *fakeAuthServer) copilotToken(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "token "+fakeAccess {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
	f.mu.Lock()
	f.copilotHit++
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"token": fakeCopilot, "expires_at": time.Now().Add(fakeCopilotLife).Unix(), "refresh_in": 1500,
		"endpoints": map[string]any{"api": f.copilotAPI},
	})
}

func (f *fakeAuthServer) tokenPolls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

// serveWithOAuth runs the service with every OAuth provider pointed at the
// fake server; codex and kimi connections get baseURL.
func serveWithOAuth(t *testing.T, f *fakeAuthServer, baseURL string) *nodetest.Instance {
	t.Helper()
	return serveWithOAuthConfig(t, f, baseURL, nodetest.Config(t.TempDir()))
}

// serveWithOAuthConfig is serveWithOAuth on cfg.
func serveWithOAuthConfig(t *testing.T, f *fakeAuthServer, baseURL string, cfg config.Config) *nodetest.Instance {
	t.Helper()
	common := func(extra map[string]string) map[string]string {
		m := map[string]string{"client_id": fakeClientID, "device_url": f.URL + "/device/code", "token_url": f.URL + "/token"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cfg.OAuth = oauth.Overrides{
		"qwen":           common(nil),
		"kimi":           common(map[string]string{"base_url": baseURL}),
		"github-copilot": common(map[string]string{"copilot_token_url": f.URL + "/copilot_internal/v2/token"}),
		"codex":          common(map[string]string{"authorize_url": f.URL + "/authorize", "base_url": baseURL}),
	}
	return nodetest.Start(t, cfg, node.AllRoles...)
}

func startDevice(t *testing.T, sb *nodetest.Instance, provider string) string {
	t.Helper()
	resp := sb.Admin(t, http.MethodPost, "/api/oauth/"+provider+"/device-code", map[string]any{"name": provider + "-login"})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	id, _ := resp.JSON["flowId"].(string)
	require.NotEmpty(t, id)
	return id
}

func poll(t *testing.T, sb *nodetest.Instance, provider, flowID string) nodetest.Response {
	t.Helper()
	return sb.Admin(t, http.MethodPost, "/api/oauth/"+provider+"/poll", map[string]any{"flowId": flowID})
}

func chatThrough(t *testing.T, sb *nodetest.Instance, model string) nodetest.Response {
	t.Helper()
	return sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{
		"model": model, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
}

func TestOAuthDeviceLoginQwen(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeAccess))
	f := newFakeAuthServer(t, oauth.CodePending, oauth.CodeSlowDown, pollOK)
	f.resourceURL = up.URL() // Qwen's resource_url picks the API host
	sb := serveWithOAuth(t, f, "")

	resp := sb.Admin(t, http.MethodPost, "/api/oauth/qwen/device-code", map[string]any{})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Equal(t, fakeUserCode, resp.JSON["userCode"])
	assert.Equal(t, f.URL+"/device", resp.JSON["verificationUri"])
	assert.Equal(t, f.URL+"/device?user_code="+fakeUserCode, resp.JSON["verificationUriComplete"])
	assert.EqualValues(t, 900, resp.JSON["expiresIn"])
	assert.EqualValues(t, 1, resp.JSON["interval"])
	assert.NotContains(t, string(resp.Body), "dc-", "the device code stays on the server")
	flowID := resp.JSON["flowId"].(string)

	p := poll(t, sb, "qwen", flowID)
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	assert.Equal(t, "pending", p.JSON["status"])
	assert.Nil(t, p.JSON["connection"])

	p = poll(t, sb, "qwen", flowID)
	assert.Equal(t, "slow_down", p.JSON["status"])
	assert.EqualValues(t, 6, p.JSON["interval"], "slow_down adds 5 seconds (RFC 8628 3.5)")

	p = poll(t, sb, "qwen", flowID)
	require.Equal(t, "complete", p.JSON["status"], "%s", p.Body)
	conn := p.JSON["connection"].(map[string]any)
	assert.Equal(t, "qwen", conn["provider"])
	assert.Equal(t, "qwen", conn["name"])
	assert.Equal(t, "oauth", conn["authType"])
	assert.Equal(t, true, conn["hasAccessToken"])
	assert.Equal(t, up.URL(), conn["providerSpecificData"].(map[string]any)["baseUrl"])
	assert.NotContains(t, string(p.Body), fakeAccess)
	assert.NotContains(t, string(p.Body), fakeRefresh)

	// Every poll carried the PKCE verifier the fake checked.
	for _, form := range f.tokenForms {
		assert.NotEmpty(t, form.Get("code_verifier"))
	}

	again := poll(t, sb, "qwen", flowID)
	require.Equal(t, "complete", again.JSON["status"])
	assert.Equal(t, conn["id"], again.JSON["connection"].(map[string]any)["id"], "a repeated poll answers the same connection")
	assert.Equal(t, 3, f.tokenPolls(), "a completed flow does not poll the provider again")

	chat := chatThrough(t, sb, "qwen/qwen3-coder-plus")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)

	creds := sb.Admin(t, http.MethodGet, "/api/providers/"+conn["id"].(string), nil)
	require.Equal(t, http.StatusOK, creds.Status)
	assert.NotEmpty(t, creds.JSON["connection"].(map[string]any)["expiresAt"])
}

func TestOAuthDeviceLoginCopilot(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeCopilot))
	f := newFakeAuthServer(t, pollOK)
	f.copilotAPI = strings.TrimSuffix(up.URL(), "/v1") + "/v1"
	sb := serveWithOAuth(t, f, "")

	flowID := startDevice(t, sb, "github-copilot")
	assert.Empty(t, f.challenges, "GitHub's device flow has no PKCE")
	p := poll(t, sb, "github-copilot", flowID)
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	require.Equal(t, "complete", p.JSON["status"], "%s", p.Body)
	conn := p.JSON["connection"].(map[string]any)
	assert.Equal(t, "github-copilot", conn["provider"])
	assert.Equal(t, "github-copilot-login", conn["name"])
	assert.Equal(t, f.copilotAPI, conn["providerSpecificData"].(map[string]any)["baseUrl"], "the Copilot token's endpoints.api")
	assert.Equal(t, 1, f.copilotHit)
	exp, err := time.Parse(time.RFC3339, conn["expiresAt"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(fakeCopilotLife), exp, time.Minute, "the Copilot token's expiry, not the GitHub token's")

	// The Copilot token is what the API gets.
	chat := chatThrough(t, sb, "copilot/gpt-4o")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
}

func TestOAuthDevicePollOutcomes(t *testing.T) {
	for _, tc := range []struct {
		code, status string
	}{
		{oauth.CodePending, "pending"},
		{oauth.CodeSlowDown, "slow_down"},
		{oauth.CodeExpiredToken, "expired"},
		{oauth.CodeAccessDenied, "denied"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := newFakeAuthServer(t, tc.code)
			sb := serveWithOAuth(t, f, "")
			flowID := startDevice(t, sb, "kimi")
			p := poll(t, sb, "kimi", flowID)
			require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
			assert.Equal(t, tc.status, p.JSON["status"])
			assert.Nil(t, p.JSON["connection"])
			if tc.status == "expired" || tc.status == "denied" {
				assert.Equal(t, tc.code, p.JSON["error"])
				gone := poll(t, sb, "kimi", flowID)
				assert.Equal(t, http.StatusGone, gone.Status, "a finished login answers 410: %s", gone.Body)
				assert.Equal(t, 1, f.tokenPolls(), "a finished login does not poll the provider again")
			}
			conns := sb.Admin(t, http.MethodGet, "/api/providers", nil)
			assert.Empty(t, conns.JSON["connections"])
		})
	}
}

// forgetFlow removes a login's record as the flow bucket's age bound does
// once the login has gone unpolled for its time.
func forgetFlow(t *testing.T, sb *nodetest.Instance, flowID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, spine.BucketOAuthFlows)
	require.NoError(t, err)
	require.NoError(t, kv.Purge(ctx, flowID))
}

// A device code can outlive the gateway's record of its login (a provider
// that gives it an hour, polled again after a laptop slept): its poll
// answers that the login expired, as a poll past the code's expiry does,
// so the CLI and the console tell the user to start again, instead of a
// 404 flow_not_found that says the login never was.
func TestOAuthDeviceLoginForgottenAnswersExpired(t *testing.T) {
	f := newFakeAuthServer(t, oauth.CodePending)
	f.codeLife = 3600
	sb := serveWithOAuth(t, f, "")
	flowID := startDevice(t, sb, "kimi")
	forgetFlow(t, sb, flowID)

	var p nodetest.Response
	require.Eventually(t, func() bool {
		p = poll(t, sb, "kimi", flowID)
		return p.JSON["status"] != "pending"
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	assert.Equal(t, "expired", p.JSON["status"])
	assert.Equal(t, oauth.CodeExpiredToken, p.JSON["error"])
	assert.Equal(t, flowID, p.JSON["flowId"])

	r := poll(t, sb, "kimi", "no-such-flow")
	assert.Equal(t, http.StatusNotFound, r.Status, "an id that was never a login's is still not found: %s", r.Body)
}

// An authorization-code login whose record is gone answers 410
// flow_expired, as one past its time does, not 404 flow_not_found.
func TestOAuthAuthorizationLoginForgottenAnswersExpired(t *testing.T) {
	f := newFakeAuthServer(t, pollOK)
	sb := serveWithOAuth(t, f, "https://example.invalid/v1")
	start := sb.Admin(t, http.MethodPost, "/api/oauth/codex/authorize", map[string]any{"redirectUri": "http://127.0.0.1:9/cb"})
	require.Equal(t, http.StatusOK, start.Status, "%s", start.Body)
	flowID := start.JSON["flowId"].(string)
	forgetFlow(t, sb, flowID)

	// A refused code leaves a known login pending; a forgotten one
	// answers otherwise.
	require.Eventually(t, func() bool {
		r := sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": flowID, "code": "wrong"})
		return r.Status != http.StatusBadRequest
	}, 10*time.Second, 50*time.Millisecond)
	r := sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": flowID, "code": fakeAuthCode})
	require.Equal(t, http.StatusGone, r.Status, "%s", r.Body)
	e, _ := r.JSON["error"].(map[string]any)
	assert.Equal(t, "flow_expired", e["code"], "%s", r.Body)
}

func TestOAuthRouteErrors(t *testing.T) {
	f := newFakeAuthServer(t, oauth.CodePending)
	sb := serveWithOAuth(t, f, "")
	errorOf := func(r nodetest.Response) map[string]any {
		e, _ := r.JSON["error"].(map[string]any)
		require.NotNil(t, e, "OpenAI error shape: %s", r.Body)
		return e
	}

	r := sb.Admin(t, http.MethodPost, "/api/oauth/nope/device-code", map[string]any{})
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, "unknown_provider", errorOf(r)["code"])
	assert.Equal(t, "not_found_error", errorOf(r)["type"])

	r = poll(t, sb, "qwen", "no-such-flow")
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, "flow_not_found", errorOf(r)["code"])

	flowID := startDevice(t, sb, "qwen")
	r = poll(t, sb, "kimi", flowID)
	assert.Equal(t, http.StatusNotFound, r.Status, "a flow answers only under its provider")

	r = sb.Admin(t, http.MethodPost, "/api/oauth/codex/device-code", map[string]any{})
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, "unsupported_flow", errorOf(r)["code"])

	r = sb.Do(t, http.MethodPost, "/api/oauth/qwen/device-code", map[string]any{})
	assert.Equal(t, http.StatusUnauthorized, r.Status, "admin token required")

	r = sb.Admin(t, http.MethodPost, "/api/oauth/qwen/poll", map[string]any{})
	assert.Equal(t, http.StatusBadRequest, r.Status)
}

func TestOAuthConcurrentPollsCreateOneConnection(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeAccess))
	f := newFakeAuthServer(t, pollOK)
	f.gate = make(chan struct{})
	sb := serveWithOAuth(t, f, up.URL())
	flowID := startDevice(t, sb, "kimi")

	const n = 4
	answers := make(chan nodetest.Response, n)
	for range n {
		go func() { answers <- poll(t, sb, "kimi", flowID) }()
	}
	<-f.polled // one poll reached the provider and holds the flow
	close(f.gate)
	ids := map[string]bool{}
	for range n {
		r := <-answers
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, "complete", r.JSON["status"], "%s", r.Body)
		ids[r.JSON["connection"].(map[string]any)["id"].(string)] = true
	}
	assert.Len(t, ids, 1, "every poll answers the one connection")
	assert.Equal(t, 1, f.tokenPolls(), "the device code was spent once")
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Len(t, conns.JSON["connections"], 1)
}

// fakeWait records the pauses of the CLI instead of sleeping.
type fakeWait struct {
	mu     sync.Mutex
	pauses []time.Duration
}

func (w *fakeWait) wait(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pauses = append(w.pauses, d)
	return nil
}

func TestLoginCLIDeviceFlow(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeAccess))
	f := newFakeAuthServer(t, oauth.CodePending, oauth.CodeSlowDown, oauth.CodePending, pollOK)
	sb := serveWithOAuth(t, f, up.URL())
	var out bytes.Buffer
	var w fakeWait
	c, err := logincli.Run(context.Background(), logincli.Options{
		URL: sb.BaseURL, AdminToken: nodetest.AdminToken, Provider: "kimi", Name: "my kimi",
		Out: &out, Wait: w.wait,
	})
	require.NoError(t, err, out.String())
	assert.Equal(t, "kimi", c.Provider)
	assert.Equal(t, "my kimi", c.Name)
	assert.NotEmpty(t, c.ID)
	assert.Contains(t, out.String(), fakeUserCode)
	assert.Contains(t, out.String(), f.URL+"/device")
	assert.Contains(t, out.String(), c.ID)
	assert.Equal(t, []time.Duration{time.Second, time.Second, 6 * time.Second, 6 * time.Second}, w.pauses,
		"polls honour the interval, and slow_down's longer one")

	chat := chatThrough(t, sb, "kimi/kimi-for-coding")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
}

func TestLoginCLIDeviceFlowDenied(t *testing.T) {
	f := newFakeAuthServer(t, oauth.CodeAccessDenied)
	sb := serveWithOAuth(t, f, "")
	var w fakeWait
	_, err := logincli.Run(context.Background(), logincli.Options{
		URL: sb.BaseURL, AdminToken: nodetest.AdminToken, Provider: "qwen", Wait: w.wait,
	})
	require.ErrorContains(t, err, "refused")
}

func TestLoginCLIAuthorizationCode(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeAccess))
	f := newFakeAuthServer(t, pollOK)
	sb := serveWithOAuth(t, f, up.URL())
	var out bytes.Buffer
	browserErr := make(chan error, 1)
	strayStatus := make(chan int, 1)
	c, err := logincli.Run(context.Background(), logincli.Options{
		URL: sb.BaseURL, AdminToken: nodetest.AdminToken, Provider: "codex",
		RedirectURI: "http://127.0.0.1:0/auth/callback",
		Out:         &out,
		// The "browser": consent at the fake, which redirects to the CLI's
		// loopback callback. Before it, another local page calls the
		// callback with a state of its own: refused, and the login goes on.
		Open: func(u string) {
			stray := 0
			if au, err := url.Parse(u); err == nil {
				if resp, err := http.Get(au.Query().Get("redirect_uri") + "?code=stray&state=not-this-login"); err == nil {
					stray = resp.StatusCode
					resp.Body.Close()
				}
			}
			strayStatus <- stray
			browserErr <- browse(u)
		},
	})
	require.NoError(t, err, out.String())
	require.NoError(t, <-browserErr)
	assert.Equal(t, http.StatusBadRequest, <-strayStatus, "a stray callback is refused")
	assert.Equal(t, "codex", c.Provider)
	assert.Equal(t, up.URL(), c.BaseURL)
	assert.Contains(t, out.String(), f.URL+"/authorize?")

	chat := chatThrough(t, sb, "codex/gpt-5-codex")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
}

// browse is a browser following u to its end: an error unless the last
// page answered 200.
func browse(u string) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("browser ended at %d", resp.StatusCode)
	}
	return nil
}

// A user who declines the consent is told so in the browser and in the
// terminal; no connection is created.
func TestLoginCLIAuthorizationCodeDeclined(t *testing.T) {
	f := newFakeAuthServer(t, pollOK)
	f.deny = true
	sb := serveWithOAuth(t, f, "https://example.invalid/v1")
	var out bytes.Buffer
	page := make(chan string, 1)
	_, err := logincli.Run(context.Background(), logincli.Options{
		URL: sb.BaseURL, AdminToken: nodetest.AdminToken, Provider: "codex",
		RedirectURI: "http://127.0.0.1:0/auth/callback",
		Out:         &out,
		Open: func(u string) {
			text := ""
			if resp, err := http.Get(u); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				text = fmt.Sprintf("%d %s", resp.StatusCode, b)
			}
			page <- text
		},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "access_denied")
	shown := <-page
	assert.NotContains(t, shown, "Sign-in received", "the browser is not told the sign-in went through")
	assert.Contains(t, shown, "refused")
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Empty(t, list.JSON["connections"])
}

func TestOAuthAuthorizationCodeRoutes(t *testing.T) {
	f := newFakeAuthServer(t, pollOK)
	sb := serveWithOAuth(t, f, "https://example.invalid/v1")
	start := sb.Admin(t, http.MethodPost, "/api/oauth/codex/authorize", map[string]any{"redirectUri": "http://127.0.0.1:9/cb"})
	require.Equal(t, http.StatusOK, start.Status, "%s", start.Body)
	flowID := start.JSON["flowId"].(string)
	authURL, err := url.Parse(start.JSON["authorizeUrl"].(string))
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:9/cb", authURL.Query().Get("redirect_uri"))
	assert.Equal(t, start.JSON["state"], authURL.Query().Get("state"))

	r := sb.Admin(t, http.MethodPost, "/api/oauth/codex/authorize", map[string]any{"redirectUri": "https://evil.example/cb"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "only loopback redirects may replace the provider's")

	// Consent at the fake without following its redirect.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL.String())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)

	r = sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": flowID, "code": "wrong"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	r = sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": flowID, "code": fakeAuthCode, "state": "other"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "state mismatch: %s", r.Body)

	r = sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": flowID, "code": fakeAuthCode + "#" + flowID})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.JSON["connection"].(map[string]any)["id"]
	again := sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": flowID, "code": fakeAuthCode})
	require.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
	assert.Equal(t, id, again.JSON["connection"].(map[string]any)["id"])
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Len(t, conns.JSON["connections"], 1)
}

// A login's tokens were issued at the login, so a token living shorter than
// its provider's lead (an hour-long Codex token against the five days Codex
// is refreshed ahead) waits half its life like a refreshed one, instead of
// being refreshed at the first scan after the login.
func TestLoginTokenShorterThanTheLeadIsNotRefreshedAtOnce(t *testing.T) {
	f := newFakeAuthServer(t, pollOK)
	cfg := nodetest.Config(t.TempDir())
	cfg.TokenScanEvery = 20 * time.Millisecond
	sb := serveWithOAuthConfig(t, f, "https://example.invalid/v1", cfg)
	start := sb.Admin(t, http.MethodPost, "/api/oauth/codex/authorize", map[string]any{"redirectUri": "http://127.0.0.1:9/cb"})
	require.Equal(t, http.StatusOK, start.Status, "%s", start.Body)
	authURL, err := url.Parse(start.JSON["authorizeUrl"].(string))
	require.NoError(t, err)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL.String())
	require.NoError(t, err)
	resp.Body.Close()
	r := sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": start.JSON["flowId"], "code": fakeAuthCode})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

	time.Sleep(time.Second) // fifty scans
	f.mu.Lock()
	defer f.mu.Unlock()
	var refreshes int
	for _, form := range f.tokenForms {
		if form.Get("grant_type") == "refresh_token" {
			refreshes++
		}
	}
	assert.Zero(t, refreshes, "a token of an hour, issued a second ago, is not due")
}
