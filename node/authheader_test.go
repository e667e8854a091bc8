package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// TestKeyOutsideBearerIsRefused: a key sent in Authorization without the
// Bearer scheme (or a credential of another scheme) is refused with 401
// invalid_api_key in the route's own shape, never served as a keyless
// request of the default machine; bearer in any case, the other key
// headers beside another scheme, an empty Bearer token and the admin
// routes are served as before.
func TestKeyOutsideBearerIsRefused(t *testing.T) {
	g := newTrustGateway(t, nil)
	chat := `{"model":"` + chatModel + `","messages":[{"role":"user","content":"hi"}]}`

	m := g.sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "team2"})
	require.Equal(t, http.StatusCreated, m.Status, "%s", m.Body)
	team2 := m.JSON["machine"].(map[string]any)["id"].(string)
	up2 := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-team2"))
	c := g.sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai", "name": "t2", "apiKey": "sk-team2",
		"providerSpecificData": map[string]any{"baseUrl": up2.URL()}}, "X-Switchboard-Machine", team2)
	require.Equal(t, http.StatusCreated, c.Status, "%s", c.Body)
	k2 := g.sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "t2"}, "X-Switchboard-Machine", team2)
	require.Equal(t, http.StatusCreated, k2.Status, "%s", k2.Body)
	team2Key := k2.JSON["key"].(string)

	gone := g.sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "gone"})
	require.Equal(t, http.StatusCreated, gone.Status, "%s", gone.Body)
	revoked := gone.JSON["key"].(string)
	require.Equal(t, http.StatusOK, g.sb.Admin(t, http.MethodDelete, "/api/keys/"+gone.JSON["id"].(string), nil).Status)

	for _, c := range []struct{ name, auth, secret string }{
		{"revoked key without a scheme", revoked, revoked},
		{"another machine's key without a scheme", team2Key, team2Key},
		{"valid key without a scheme", g.key, g.key},
		{"Basic credentials", "Basic Zm9vOmJhcg==", "Zm9vOmJhcg=="},
		{"scheme glued to the key", "Bearer" + g.key, g.key},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := g.upstreamCalls() + len(up2.Requests())
			r := g.sb.Do(t, http.MethodPost, pathChat, chat, "Authorization", c.auth)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
			assert.Equal(t, "invalid_api_key", errorCode(r))
			assert.Contains(t, string(r.Body), "Authorization: Bearer <key>", "says how to send the key")
			assert.NotContains(t, string(r.Body), c.secret, "the credential is not echoed")
			assert.Equal(t, before, g.upstreamCalls()+len(up2.Requests()), "no upstream spent")

			r = g.sb.Do(t, http.MethodPost, pathMessages, messagesBody(chatModel, "hi", false), "Authorization", c.auth)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
			assert.Equal(t, "error", r.JSON["type"], "Anthropic's shape: %s", r.Body)
			assert.Equal(t, "authentication_error", errorType(r))
			assert.NotContains(t, string(r.Body), c.secret)
		})
	}
	t.Run("legacy path", func(t *testing.T) {
		r := g.sb.Do(t, http.MethodPost, "/"+g.sb.Node.DefaultMachineID()+pathChat, chat, "Authorization", g.key)
		assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
		assert.Equal(t, "invalid_api_key", errorCode(r), "a key was sent: it is not missing")
	})

	t.Run("served as before", func(t *testing.T) {
		for _, h := range [][]string{
			{"Authorization", "bearer " + g.key},
			{"Authorization", "BEARER " + g.key},
			{"Authorization", "Basic Zm9vOmJhcg==", "X-Api-Key", g.key},
			{"Authorization", "Basic Zm9vOmJhcg==", "X-Goog-Api-Key", g.key},
			{"Authorization", "Bearer "},
			{},
		} {
			r := g.sb.Do(t, http.MethodPost, pathChat, chat, h...)
			assert.Equal(t, http.StatusOK, r.Status, "%v: %s", h, r.Body)
		}
		r := g.sb.Do(t, http.MethodPost, pathChat, chat, "Authorization", "Bearer sk-no-key")
		assert.Equal(t, http.StatusUnauthorized, r.Status, "a placeholder key that is sent is checked")
		assert.Equal(t, "invalid_api_key", errorCode(r))

		before := len(up2.Requests())
		r = g.sb.Do(t, http.MethodPost, pathChat, chat, "Authorization", "bearer "+team2Key)
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Len(t, up2.Requests(), before+1, "the key's machine serves it")
	})

	t.Run("admin routes", func(t *testing.T) {
		assert.Equal(t, http.StatusOK, g.sb.Admin(t, http.MethodGet, "/api/keys", nil).Status)
		r := g.sb.Do(t, http.MethodGet, "/api/keys", nil, "Authorization", nodetest.AdminToken)
		assert.Equal(t, http.StatusUnauthorized, r.Status)
		assert.Equal(t, "invalid_admin_token", errorCode(r))
	})

	t.Run("keys required", func(t *testing.T) {
		s := g.sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": true})
		require.Equal(t, http.StatusOK, s.Status, "%s", s.Body)
		r := g.sb.Do(t, http.MethodPost, pathChat, chat, "Authorization", g.key)
		assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
		assert.Equal(t, "invalid_api_key", errorCode(r), "a key was sent: it is not missing")
		r = g.sb.Do(t, http.MethodPost, pathChat, chat, "Authorization", "Bearer "+g.key)
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})
}

// TestMissingKeyOnMessagesNamesXAPIKey: where the machine requires keys, a
// Messages request without one (Claude Code and the Anthropic SDK send
// x-api-key) is told to send x-api-key, in Anthropic's shape; a chat
// request is still told Authorization: Bearer.
func TestMissingKeyOnMessagesNamesXAPIKey(t *testing.T) {
	g := newTrustGateway(t, nil)
	s := g.sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": true})
	require.Equal(t, http.StatusOK, s.Status, "%s", s.Body)
	for _, path := range []string{pathMessages, pathMessages + "/count_tokens"} {
		r := g.sb.Do(t, http.MethodPost, path, messagesBody(chatModel, "hi", false))
		assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
		assert.Equal(t, "error", r.JSON["type"], "Anthropic's shape: %s", r.Body)
		assert.Equal(t, "authentication_error", errorType(r))
		assert.Contains(t, errorMessageOf(r), "x-api-key", path)
	}
	r := g.sb.Do(t, http.MethodPost, pathChat, `{"model":"`+chatModel+`","messages":[{"role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	assert.Equal(t, "missing_api_key", errorCode(r))
	assert.Contains(t, errorMessageOf(r), "Authorization: Bearer <key>")
}

func errorMessageOf(r nodetest.Response) string {
	e, _ := r.JSON["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}
