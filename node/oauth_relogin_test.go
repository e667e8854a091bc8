package node_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/logincli"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// awaitRelogin makes the connection id, reached through model, need a new
// login: the upstream refuses its access token, and the provider its
// refresh token.
func awaitRelogin(t *testing.T, sb *nodetest.Instance, model, id string) {
	t.Helper()
	r := chatThrough(t, sb, model)
	require.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
	require.Eventually(t, func() bool {
		return connectionWithout(t, sb, id)["needsRelogin"] == true
	}, 10*time.Second, 20*time.Millisecond, "the connection needs a new login")
}

// codexIDToken is an id_token naming a ChatGPT workspace and one of its
// users as OpenAI's does, unsigned.
func codexIDToken(account, user string) string {
	claims, _ := json.Marshal(map[string]any{"https://api.openai.com/auth": map[string]any{
		"chatgpt_account_id": account, "chatgpt_user_id": user}})
	return "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString(claims) + ".sig"
}

// codexExchange runs a codex authorization-code login against the fake
// auth server and answers the exchange.
func codexExchange(t *testing.T, sb *nodetest.Instance) nodetest.Response {
	t.Helper()
	start := sb.Admin(t, http.MethodPost, "/api/oauth/codex/authorize", map[string]any{"redirectUri": "http://127.0.0.1:9/cb"})
	require.Equal(t, http.StatusOK, start.Status, "%s", start.Body)
	authURL, err := url.Parse(start.JSON["authorizeUrl"].(string))
	require.NoError(t, err)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL.String())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	return sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": start.JSON["flowId"], "code": fakeAuthCode})
}

// A subscription connection whose refresh token was refused is mended by
// the next login of its provider: the login renews its tokens under its id,
// with the settings the operator gave it, instead of adding a second
// connection beside the broken one.
func TestOAuthReloginRenewsTheConnectionThatNeedsIt(t *testing.T) {
	const renewed = "at-relogin-3e81d0"
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(renewed))
	f := newFakeAuthServer(t, pollOK)
	f.refuseRefresh = true
	sb := serveWithOAuth(t, f, up.URL())

	first := poll(t, sb, "kimi", startDevice(t, sb, "kimi"))
	require.Equal(t, "complete", first.JSON["status"], "%s", first.Body)
	id := first.JSON["connection"].(map[string]any)["id"].(string)
	settings := map[string]any{
		"name": "my kimi", "priority": 3,
		"providerSpecificData": map[string]any{
			"prefix": "mk", "enabledModels": []string{"kimi-for-coding"},
			"caveman": map[string]any{"enabled": true, "level": "lite"},
		},
	}
	edited := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, settings)
	require.Equal(t, http.StatusOK, edited.Status, "%s", edited.Body)
	awaitRelogin(t, sb, "mk/kimi-for-coding", id)

	f.mu.Lock()
	f.access = renewed
	f.mu.Unlock()
	again := poll(t, sb, "kimi", startDevice(t, sb, "kimi"))
	require.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
	require.Equal(t, "complete", again.JSON["status"], "%s", again.Body)
	conn := again.JSON["connection"].(map[string]any)
	assert.Equal(t, id, conn["id"], "the login names the connection it mended")
	assert.Equal(t, true, again.JSON["renewed"], "%s", again.Body)
	assert.Equal(t, false, conn["needsRelogin"])
	assert.Equal(t, "my kimi", conn["name"])
	assert.EqualValues(t, 3, conn["priority"])
	data := conn["providerSpecificData"].(map[string]any)
	assert.Equal(t, "mk", data["prefix"])
	assert.Equal(t, []any{"kimi-for-coding"}, data["enabledModels"])
	assert.Equal(t, map[string]any{"enabled": true, "level": "lite"}, data["caveman"])
	assert.NotContains(t, string(again.Body), renewed)

	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Len(t, list.JSON["connections"], 1, "no second connection beside the mended one")
	chat := chatThrough(t, sb, "mk/kimi-for-coding")
	require.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
	bs := bearers(up, pathChat)
	assert.Equal(t, "Bearer "+renewed, bs[len(bs)-1], "the mended connection sends the new login's token")

	repeated := poll(t, sb, "kimi", again.JSON["flowId"].(string))
	require.Equal(t, "complete", repeated.JSON["status"], "%s", repeated.Body)
	assert.Equal(t, id, repeated.JSON["connection"].(map[string]any)["id"], "a repeated poll answers the mended connection")
	assert.Equal(t, true, repeated.JSON["renewed"])
}

// A login renews the connection of its own account, which a codex login's
// id_token names (its ChatGPT workspace and user), and only that one: a
// login of another account, another member of the same workspace
// included, adds a connection of its own even while one of another
// account awaits a new login.
func TestOAuthReloginRenewsTheConnectionOfItsAccount(t *testing.T) {
	const (
		firstAccess  = "at-user-a-one-91c2"
		secondAccess = "at-user-a-two-5d07"
		otherAccess  = "at-user-b-44e1a8"
		otherAgain   = "at-user-b-two-0f3a"
	)
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(secondAccess, otherAccess, otherAgain), upstreamtest.WithChatGPTBackend())
	f := newFakeAuthServer(t, pollOK)
	f.refuseRefresh = true
	sb := serveWithOAuth(t, f, up.URL())
	login := func(access, user string) nodetest.Response {
		t.Helper()
		f.mu.Lock()
		f.access, f.idToken = access, codexIDToken("ws-team-1", user)
		f.mu.Unlock()
		return codexExchange(t, sb)
	}

	first := login(firstAccess, "user-a")
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	id := first.JSON["connection"].(map[string]any)["id"].(string)
	awaitRelogin(t, sb, "codex/gpt-5-codex", id)

	other := login(otherAccess, "user-b")
	require.Equal(t, http.StatusCreated, other.Status, "another user of the workspace is a connection of its own: %s", other.Body)
	otherID := other.JSON["connection"].(map[string]any)["id"].(string)
	assert.NotEqual(t, id, otherID)
	assert.Equal(t, true, connectionWithout(t, sb, id)["needsRelogin"], "the first user's connection still awaits its login")

	again := login(secondAccess, "user-a")
	require.Equal(t, http.StatusOK, again.Status, "a renewal creates nothing: %s", again.Body)
	assert.Equal(t, id, again.JSON["connection"].(map[string]any)["id"])
	assert.Equal(t, true, again.JSON["renewed"])
	assert.Equal(t, false, again.JSON["connection"].(map[string]any)["needsRelogin"])

	// A login of an account whose connection works renews it as well, and
	// `switchboard login` says so.
	f.mu.Lock()
	f.access, f.idToken = otherAgain, codexIDToken("ws-team-1", "user-b")
	f.mu.Unlock()
	var out bytes.Buffer
	c, err := logincli.Run(context.Background(), logincli.Options{
		URL: sb.BaseURL, AdminToken: nodetest.AdminToken, Provider: "codex",
		RedirectURI: "http://127.0.0.1:0/auth/callback", Out: &out,
		Open: func(u string) { assert.NoError(t, browse(u)) },
	})
	require.NoError(t, err, out.String())
	assert.Equal(t, otherID, c.ID)
	assert.True(t, c.Renewed)
	assert.Contains(t, out.String(), "Signed in again: connection "+otherID)

	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Len(t, list.JSON["connections"], 2)
}
