package tokenrefresh

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
)

// Copilot connections keep the GitHub token as their refresh token and the
// short-lived Copilot token as their access token.
const (
	githubToken = "gho-github-7a1e22"
	newCopilot  = "tid=new-copilot-94bd0c"
)

// copilotServer is GitHub's Copilot token exchange: GET
// /copilot_internal/v2/token with "Authorization: token <GitHub token>".
// It records the requests and answers each with status and body.
type copilotServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string // method, path and Authorization header
	bodies   []int    // request body sizes
}

func newCopilotServer(t *testing.T, status int, body string) *copilotServer {
	t.Helper()
	cs := &copilotServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		cs.mu.Lock()
		cs.requests = append(cs.requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		cs.bodies = append(cs.bodies, len(b))
		cs.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *copilotServer) received() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.requests...)
}

func newCopilotAdmin(exchangeURL string, gen uint64) *fakeAdmin {
	admin := newFakeAdmin(exchangeURL, gen)
	admin.creds.Connection.Provider = "github-copilot"
	admin.creds.AccessToken = oldAccess
	admin.creds.RefreshToken = githubToken
	admin.creds.ClientId = "Iv1.b507a08c87ecfe98"
	return admin
}

func TestRefreshMethodByProvider(t *testing.T) {
	assert.Equal(t, oauth.RefreshCopilotExchange, oauth.RefreshMethodOf("github-copilot"))
	for _, id := range []string{"qwen", "kimi", "codex", "openai-compatible-oauth", "claude", ""} {
		assert.Equal(t, oauth.RefreshGrant, oauth.RefreshMethodOf(id), id)
	}
	for _, m := range []oauth.RefreshMethod{oauth.RefreshGrant, oauth.RefreshCopilotExchange} {
		assert.Contains(t, renewers, m, "every method of the table has a renewer")
	}
}

func TestTokenRefreshCopilotExchange(t *testing.T) {
	expiry := time.Now().Add(25 * time.Minute).Truncate(time.Second)
	success := `{"token":"` + newCopilot + `","expires_at":` + strconv.FormatInt(expiry.Unix(), 10) +
		`,"refresh_in":1500,"endpoints":{"api":"https://api.individual.githubcopilot.com"}}`
	type want struct {
		err        bool
		stored     bool
		access     string
		relogin    bool
		errorText  string
		generation uint64
	}
	cases := []struct {
		name   string
		status int
		body   string
		want   want
	}{
		{
			name: "new Copilot token", status: 200, body: success,
			want: want{stored: true, access: newCopilot, generation: 4},
		},
		{
			name: "401 needs a new login", status: 401, body: `{"message":"Bad credentials"}`,
			want: want{stored: true, relogin: true, errorText: "refused the GitHub token", generation: 3},
		},
		{
			name: "403 needs a new login", status: 403,
			body: `{"error_details":{"message":"no Copilot access for ` + githubToken + `"}}`,
			want: want{stored: true, relogin: true, errorText: "refused the GitHub token", generation: 3},
		},
		{
			name: "404 is recorded, not retried", status: 404, body: `{"message":"Not Found"}`,
			want: want{stored: true, errorText: "404", generation: 3},
		},
		{
			name: "server error is retried", status: 502, body: `bad gateway`,
			want: want{err: true, generation: 3},
		},
		{
			name: "rate limit is retried", status: 429, body: `{}`,
			want: want{err: true, generation: 3},
		},
		{
			name: "garbled success is retried", status: 200, body: `<html>captive portal</html>`,
			want: want{err: true, generation: 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCopilotServer(t, tc.status, tc.body)
			admin := newCopilotAdmin(cs.URL+"/copilot_internal/v2/token", 3)
			r, logs := newRefresher(admin)

			err := r.Handle(context.Background(), job(3))
			if tc.want.err {
				require.Error(t, err)
				assertNoSecrets(t, "the job error", err.Error())
				assert.NotContains(t, err.Error(), githubToken)
			} else {
				require.NoError(t, err)
			}

			// One exchange with the GitHub token, no refresh-token grant.
			assert.Equal(t, []string{"GET /copilot_internal/v2/token token " + githubToken}, cs.received())
			assert.Equal(t, []int{0}, cs.bodies)

			stored := admin.storedRequests()
			if !tc.want.stored {
				assert.Empty(t, stored)
			} else {
				require.Len(t, stored, 1)
				s := stored[0]
				assert.Equal(t, uint64(3), s.GetGeneration())
				assert.Equal(t, tc.want.access, s.GetAccessToken())
				assert.Empty(t, s.GetRefreshToken(), "the GitHub token stays the refresh material")
				assert.Equal(t, tc.want.relogin, s.GetNeedsRelogin())
				if tc.want.errorText != "" {
					assert.Contains(t, s.GetError(), tc.want.errorText)
				} else {
					assert.Empty(t, s.GetError())
				}
				assertNoSecrets(t, "the stored error", s.GetError())
				assert.NotContains(t, s.GetError(), githubToken)
				if tc.want.access != "" {
					require.NotNil(t, s.GetExpiresAt())
					assert.Equal(t, expiry, s.GetExpiresAt().AsTime().Local(), "the Copilot token's own expiry")
				}
			}
			assert.Equal(t, tc.want.generation, admin.creds.GetGeneration())
			assertNoSecrets(t, "the log", logs.String())
			assert.NotContains(t, logs.String(), githubToken)
			assert.NotContains(t, logs.String(), newCopilot)
		})
	}
}

// The exchange goes through the connection's proxy, like the grant.
func TestTokenRefreshCopilotExchangeThroughProxy(t *testing.T) {
	cs := newCopilotServer(t, 200, `{"token":"`+newCopilot+`","expires_at":`+strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)+`}`)
	targets := startSOCKS5(t)
	admin := newCopilotAdmin(cs.URL+"/copilot_internal/v2/token", 3)
	admin.creds.ProxyUrl = "socks5://" + targets.addr
	r, _ := newRefresher(admin)
	require.NoError(t, r.Handle(context.Background(), job(3)))
	assert.Equal(t, []string{strings.TrimPrefix(cs.URL, "http://")}, targets.list())
	require.Len(t, admin.storedRequests(), 1)
	assert.Equal(t, newCopilot, admin.storedRequests()[0].GetAccessToken())
}
