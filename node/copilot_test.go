package node_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Copilot tokens of the refresh tests, distinctive so that a leak is caught.
const (
	copilotOld      = "tid=cop-old-31b7a4"
	copilotNew      = "tid=cop-new-c90e12"
	copilotSentinel = "tid=cop-sentinel-5d2f60"
	githubDirect    = "gho-direct-e4a917"
	githubSentinel  = "gho-sentinel-0b83d5"
)

// copilotAnswer is one answer of the fake Copilot exchange: a token, or a
// refusal with status.
type copilotAnswer struct {
	status int
	token  string
}

// fakeCopilotExchange is GitHub's Copilot token exchange (GET
// /copilot_internal/v2/token with "Authorization: token <GitHub token>"):
// it answers the scripted answers in turn (the last repeats) and records
// the GitHub tokens it was sent.
type fakeCopilotExchange struct {
	*httptest.Server
	// api is the endpoints.api of the tokens.
	api string

	mu     sync.Mutex
	script []copilotAnswer
	auths  []string
}

func newFakeCopilotExchange(t *testing.T, api string, script ...copilotAnswer) *fakeCopilotExchange {
	t.Helper()
	f := &fakeCopilotExchange{api: api, script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/copilot_internal/v2/token" {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		a := f.script[0]
		if len(f.script) > 1 {
			f.script = f.script[1:]
		}
		f.mu.Unlock()
		if a.status != http.StatusOK {
			writeJSON(w, a.status, map[string]any{"message": "Bad credentials"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"token": a.token, "expires_at": time.Now().Add(fakeCopilotLife).Unix(), "refresh_in": 1500,
			"endpoints": map[string]any{"api": f.api},
		})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeCopilotExchange) URL() string { return f.Server.URL + "/copilot_internal/v2/token" }

// exchanges lists the Authorization headers of the exchanges so far.
func (f *fakeCopilotExchange) exchanges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auths...)
}

func (f *fakeCopilotExchange) count(githubToken string) int {
	n := 0
	for _, a := range f.exchanges() {
		if a == "token "+githubToken {
			n++
		}
	}
	return n
}

// serveCopilot runs the service with GitHub Copilot's login pointed at the
// fake authorization server and its token exchange at ex.
func serveCopilot(t *testing.T, f *fakeAuthServer, ex *fakeCopilotExchange, tokenScan time.Duration) *nodetest.Instance {
	t.Helper()
	cfg := nodetest.Config(t.TempDir())
	if tokenScan > 0 {
		cfg.TokenScanEvery = tokenScan
	}
	cfg.OAuth = oauth.Overrides{"github-copilot": {
		"client_id": fakeClientID, "device_url": f.URL + "/device/code", "token_url": f.URL + "/token",
		"copilot_token_url": ex.URL(),
	}}
	return nodetest.Start(t, cfg, node.AllRoles...)
}

// copilotConnection reads a connection through the admin API and checks
// that no token of these tests is in it.
func copilotConnection(t *testing.T, sb *nodetest.Instance, id string) map[string]any {
	t.Helper()
	return connectionWithout(t, sb, id, copilotOld, copilotNew, copilotSentinel, githubDirect, githubSentinel, fakeAccess)
}

func connExpiry(t *testing.T, c map[string]any) time.Time {
	t.Helper()
	s, _ := c["expiresAt"].(string)
	if s == "" {
		return time.Time{}
	}
	exp, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return exp
}

// loginCopilot runs GitHub's device login against the fake and returns
// the new connection's id.
func loginCopilot(t *testing.T, sb *nodetest.Instance) string {
	t.Helper()
	p := poll(t, sb, "github-copilot", startDevice(t, sb, "github-copilot"))
	require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
	require.Equal(t, "complete", p.JSON["status"], "%s", p.Body)
	conn := p.JSON["connection"].(map[string]any)
	require.Equal(t, "github-copilot", conn["provider"])
	return conn["id"].(string)
}

// A Copilot connection's access token is the short-lived Copilot token: when
// the API refuses it, the worker exchanges the stored GitHub token for a new
// one (no refresh-token grant), once, and the request is retried with it.
func TestCopilotRefreshOn401ExchangesGitHubToken(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(copilotNew))
	api := strings.TrimSuffix(up.URL(), "/v1") + "/v1"
	ex := newFakeCopilotExchange(t, api,
		copilotAnswer{status: http.StatusOK, token: copilotOld}, // the login's
		copilotAnswer{status: http.StatusOK, token: copilotNew}, // the refresh's
	)
	f := newFakeAuthServer(t, pollOK)
	sb := serveCopilot(t, f, ex, 0)
	id := loginCopilot(t, sb)
	require.Equal(t, []string{"token " + fakeAccess}, ex.exchanges(), "the login exchanged the GitHub token once")

	chat := chatThrough(t, sb, "copilot/gpt-4o")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
	assert.Equal(t, []string{"Bearer " + copilotOld, "Bearer " + copilotNew}, bearers(up, upstreamtest.PathChatCompletions),
		"refused once, retried once with the new Copilot token")
	assert.Equal(t, []string{"token " + fakeAccess, "token " + fakeAccess}, ex.exchanges(),
		"one refresh: an exchange of the stored GitHub token")
	for _, form := range f.tokenForms {
		assert.Equal(t, oauth.DeviceGrantType, form.Get("grant_type"), "no refresh-token grant at GitHub")
	}

	c := copilotConnection(t, sb, id)
	assert.Equal(t, false, c["needsRelogin"])
	assert.Equal(t, api, c["providerSpecificData"].(map[string]any)["baseUrl"])
	assert.WithinDuration(t, time.Now().Add(fakeCopilotLife), connExpiry(t, c), time.Minute,
		"the new Copilot token's expiry")

	// The new token serves the next request without an exchange; a later
	// refusal exchanges the same GitHub token again (it was kept).
	require.Equal(t, http.StatusOK, chatThrough(t, sb, "copilot/gpt-4o").Status)
	assert.Len(t, ex.exchanges(), 2)
	up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Unauthorized())
	chat = chatThrough(t, sb, "copilot/gpt-4o")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
	assert.Equal(t, 3, ex.count(fakeAccess), "the GitHub token stays the refresh material")
}

// An exchange refused with 401 (the GitHub token was revoked) marks the
// Copilot connection as needing a new login; routing then skips it.
func TestCopilotExchangeRefusedNeedsRelogin(t *testing.T) {
	const fallbackKey = "sk-copilot-fallback-8e1d"
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fallbackKey))
	ex := newFakeCopilotExchange(t, "", copilotAnswer{status: http.StatusUnauthorized})
	f := newFakeAuthServer(t, pollOK)
	sb := serveCopilot(t, f, ex, 0)
	id := sb.CreateConnection(t, map[string]any{
		"provider": "github-copilot", "name": "direct",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
		"oauth":                map[string]any{"accessToken": copilotOld, "refreshToken": githubDirect, "tokenUrl": ex.URL()},
	})
	sb.CreateConnection(t, map[string]any{
		"provider": "github-copilot", "name": "key", "apiKey": fallbackKey, "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})

	chat := chatThrough(t, sb, "copilot/gpt-4o")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
	assert.Equal(t, []string{"Bearer " + copilotOld, "Bearer " + fallbackKey}, bearers(up, upstreamtest.PathChatCompletions),
		"the OAuth connection first, then the fallback")
	require.Eventually(t, func() bool {
		return copilotConnection(t, sb, id)["needsRelogin"] == true
	}, 10*time.Second, 20*time.Millisecond, "the Copilot connection needs a new login")
	assert.Equal(t, []string{"token " + githubDirect}, ex.exchanges(), "one exchange, not retried")

	require.Equal(t, http.StatusOK, chatThrough(t, sb, "copilot/gpt-4o").Status)
	assert.Len(t, ex.exchanges(), 1)
	assert.Equal(t, []string{"Bearer " + copilotOld, "Bearer " + fallbackKey, "Bearer " + fallbackKey}, bearers(up, upstreamtest.PathChatCompletions))
}

// A Copilot token within the provider's lead time (5 minutes) is exchanged
// anew by the scheduler with no request arriving, and not again once fresh.
func TestCopilotProactiveRefresh(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(copilotNew))
	ex := newFakeCopilotExchange(t, "", copilotAnswer{status: http.StatusOK, token: copilotNew})
	f := newFakeAuthServer(t, pollOK)
	sb := serveCopilot(t, f, ex, 20*time.Millisecond)
	create := func(githubToken string, exp time.Time) string {
		return sb.CreateConnection(t, map[string]any{
			"provider": "github-copilot", "name": "copilot",
			"providerSpecificData": map[string]any{"baseUrl": up.URL()},
			"oauth": map[string]any{
				"accessToken": copilotOld, "refreshToken": githubToken, "tokenUrl": ex.URL(),
				"expiresAt": exp.UTC().Format(time.RFC3339Nano),
			},
		})
	}
	id := create(githubDirect, time.Now().Add(2*time.Minute))

	require.Eventually(t, func() bool {
		return connExpiry(t, copilotConnection(t, sb, id)).After(time.Now().Add(20 * time.Minute))
	}, 10*time.Second, 20*time.Millisecond, "the due Copilot token is exchanged for one with the new lifetime")
	assert.Equal(t, []string{"token " + githubDirect}, ex.exchanges())
	assert.Empty(t, up.Requests(), "no request reached the API")
	assert.Equal(t, false, copilotConnection(t, sb, id)["needsRelogin"])

	// The new token serves requests.
	require.Equal(t, http.StatusOK, chatThrough(t, sb, "copilot/gpt-4o").Status)
	assert.Equal(t, []string{"Bearer " + copilotNew}, bearers(up, upstreamtest.PathChatCompletions))

	// Scans go on: a connection created now is refreshed by a later scan,
	// which does not exchange the fresh token's GitHub token again.
	create(githubSentinel, time.Now().Add(time.Minute))
	require.Eventually(t, func() bool { return ex.count(githubSentinel) == 1 }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, ex.count(githubDirect), "the fresh Copilot token is not refreshed again")
}
