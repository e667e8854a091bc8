package tokenrefresh

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A claude connection's refresh goes to Anthropic's token endpoint, which
// reads only a JSON body (a form is refused as an invalid request): the
// grant is sent as JSON, and the rotated refresh token is kept.
func TestRefreshOfClaudeSendsJSON(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]string
	var ctypes []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b map[string]string
		mu.Lock()
		ctypes = append(ctypes, r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if json.Unmarshal(raw, &b) != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"Invalid request format"}}`)
			return
		}
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"token_type":"Bearer","access_token":"`+newAccess+`","refresh_token":"`+newRefresh+`","expires_in":28800}`)
	}))
	defer ts.Close()
	admin := newFakeAdmin(ts.URL+"/v1/oauth/token", 3)
	admin.creds.Connection.Provider = "claude"
	admin.creds.ClientId = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
	r, logs := newRefresher(admin)
	require.NoError(t, r.Handle(context.Background(), job(3)))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ctypes, 1)
	assert.Equal(t, "application/json", ctypes[0])
	require.Len(t, bodies, 1)
	assert.Equal(t, map[string]string{
		"grant_type": "refresh_token", "refresh_token": oldRefresh, "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
	}, bodies[0])
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.Equal(t, newAccess, stored[0].GetAccessToken())
	assert.Equal(t, newRefresh, stored[0].GetRefreshToken(), "the rotated refresh token is kept")
	assert.False(t, stored[0].GetNeedsRelogin())
	assertNoSecrets(t, "logs", logs.String())
}
