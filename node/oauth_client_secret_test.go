package node_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// SWITCHBOARD_OAUTH_<PROVIDER>_CLIENT_SECRET goes with the refresh grant as
// with the login's calls: a provider that needs the secret (a confidential
// client) signs the operator in and refreshes the connection's tokens, so
// it outlives its first access token.
func TestOAuthRefreshSendsTheConfiguredClientSecret(t *testing.T) {
	const secret = "cs-operator-5b1d"
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("at-secret-1", "at-secret-2"))
	var mu sync.Mutex
	var refreshForms []string
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("client_id") != fakeClientID || (r.PostForm.Get("client_secret") != secret) {
			if r.PostForm.Get("grant_type") == "refresh_token" {
				mu.Lock()
				refreshForms = append(refreshForms, r.PostForm.Encode())
				mu.Unlock()
			}
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
			return
		}
		switch {
		case r.URL.Path == "/device/code":
			writeJSON(w, http.StatusOK, map[string]any{"device_code": "dc", "user_code": "U-1", "verification_uri": "https://example.test/device", "expires_in": 600, "interval": 1})
		case r.PostForm.Get("grant_type") == oauth.DeviceGrantType:
			writeJSON(w, http.StatusOK, map[string]any{"access_token": "at-secret-1", "refresh_token": "rt-secret-1", "expires_in": 3600})
		case r.PostForm.Get("grant_type") == "refresh_token":
			mu.Lock()
			refreshForms = append(refreshForms, r.PostForm.Encode())
			mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"access_token": "at-secret-2", "refresh_token": "rt-secret-2", "expires_in": 3600})
		}
	}))
	t.Cleanup(auth.Close)
	cfg := nodetest.Config(t.TempDir())
	cfg.OAuth = oauth.Overrides{"kimi": {"client_id": fakeClientID, "client_secret": secret,
		"device_url": auth.URL + "/device/code", "token_url": auth.URL + "/token", "base_url": up.URL()}}
	sb := nodetest.Start(t, cfg, node.AllRoles...)

	flow := startDevice(t, sb, "kimi")
	p := poll(t, sb, "kimi", flow)
	require.Equal(t, "complete", p.JSON["status"], "the login (with the secret) works: %s", p.Body)

	// The first access token is refused: the worker refreshes it.
	up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Unauthorized())
	chat := chatThrough(t, sb, "kimi/kimi-for-coding")
	mu.Lock()
	forms := append([]string(nil), refreshForms...)
	mu.Unlock()
	require.NotEmpty(t, forms, "a refresh was attempted")
	assert.Contains(t, forms[0], "client_secret=", "the refresh grant carried no client secret")
	assert.Equal(t, http.StatusOK, chat.Status, "%s", chat.Body)
}
