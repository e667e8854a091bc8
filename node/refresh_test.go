package node_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Token values of the refresh tests, distinctive so that a leak is caught.
const (
	oauthOldAccess  = "at-old-7d41c2"
	oauthRefresh1   = "rt-one-0a93fe"
	oauthNewAccess  = "at-new-b85e17"
	oauthRefresh2   = "rt-two-62cd40"
	oauthClientID   = "cid"
	oauthEmbedModel = "openai-compatible-oauth/text-embedding-3-small"
)

// fakeTokenEndpoint is an OAuth token endpoint: it records the refresh-token
// grants it receives and answers each with the next scripted answer (the
// last one repeats).
type fakeTokenEndpoint struct {
	*httptest.Server
	mu      sync.Mutex
	answers []tokenAnswer
	forms   []url.Values
	// gate, when set, is waited for (at most 10 s) before answering.
	gate <-chan struct{}
}

type tokenAnswer struct {
	status int
	body   string
}

func newFakeTokenEndpoint(t *testing.T, answers ...tokenAnswer) *fakeTokenEndpoint {
	t.Helper()
	f := &fakeTokenEndpoint{answers: answers}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" ||
			r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.forms = append(f.forms, r.PostForm)
		a := f.answers[0]
		if len(f.answers) > 1 {
			f.answers = f.answers[1:]
		}
		gate := f.gate
		f.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-time.After(10 * time.Second):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeTokenEndpoint) URL() string { return f.Server.URL + "/oauth/token" }

func (f *fakeTokenEndpoint) grants() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.forms...)
}

func refreshGrant(refreshToken string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "client_id": {oauthClientID}}
}

func tokensAnswer(access, refresh string) tokenAnswer {
	body := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600}
	if refresh != "" {
		body["refresh_token"] = refresh
	}
	data, _ := json.Marshal(body)
	return tokenAnswer{status: http.StatusOK, body: string(data)}
}

func createOAuthConnection(t *testing.T, sb *nodetest.Instance, upstreamURL, tokenURL string) string {
	t.Helper()
	return sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-oauth", "name": "o",
		"providerSpecificData": map[string]any{"baseUrl": upstreamURL},
		"oauth": map[string]any{
			"accessToken": oauthOldAccess, "refreshToken": oauthRefresh1,
			"tokenUrl": tokenURL, "clientId": oauthClientID,
		},
	})
}

func embed(t *testing.T, sb *nodetest.Instance) nodetest.Response {
	t.Helper()
	return sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": oauthEmbedModel, "input": "hi"})
}

// connection reads a connection through the admin API and checks that no
// token of these tests is in it.
func connection(t *testing.T, sb *nodetest.Instance, id string) map[string]any {
	t.Helper()
	return connectionWithout(t, sb, id, oauthOldAccess, oauthRefresh1, oauthNewAccess, oauthRefresh2)
}

// Failure scenario 17: an upstream refuses the access token; the worker
// refreshes it once and the request is retried with the new token.
func TestRefreshOn401RetriesWithNewToken(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t,
		tokensAnswer(oauthNewAccess, oauthRefresh2), // rotates the refresh token
		tokensAnswer(oauthNewAccess, ""),            // keeps it
	)
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())
	before := connection(t, sb, id)
	assert.Equal(t, "oauth", before["authType"])

	resp := embed(t, sb)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Len(t, resp.JSON["data"], 1)

	assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1)}, tokens.grants(), "one refresh-token grant")
	assert.Equal(t, []string{"Bearer " + oauthOldAccess, "Bearer " + oauthNewAccess}, bearers(up, upstreamtest.PathEmbeddings),
		"refused once, retried once with the new token")

	c := connection(t, sb, id)
	assert.Equal(t, false, c["needsRelogin"])
	assert.Equal(t, true, c["hasAccessToken"])
	require.NotEmpty(t, c["expiresAt"], "the new lifetime is stored")
	exp, err := time.Parse(time.RFC3339Nano, c["expiresAt"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), exp, 5*time.Minute)

	// The new token serves the next request without a refresh.
	require.Equal(t, http.StatusOK, embed(t, sb).Status)
	assert.Len(t, tokens.grants(), 1)

	// The rotated refresh token was stored: the next refresh sends it.
	up.Enqueue(upstreamtest.PathEmbeddings, upstreamtest.Unauthorized())
	resp = embed(t, sb)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1), refreshGrant(oauthRefresh2)}, tokens.grants())

	// That answer carried no refresh token, so the rotated one is kept.
	up.Enqueue(upstreamtest.PathEmbeddings, upstreamtest.Unauthorized())
	require.Equal(t, http.StatusOK, embed(t, sb).Status)
	grants := tokens.grants()
	require.Len(t, grants, 3)
	assert.Equal(t, refreshGrant(oauthRefresh2), grants[2])
	assert.Equal(t, false, connection(t, sb, id)["needsRelogin"])
}

// Failure scenario 18: the refresh token is refused; the request is answered
// by the next connection, and the OAuth connection needs a new login.
func TestRefreshRefusedFallsBackAndNeedsRelogin(t *testing.T) {
	const fallbackKey = "sk-fallback-2f9a61"
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fallbackKey))
	tokens := newFakeTokenEndpoint(t, tokenAnswer{
		status: http.StatusBadRequest,
		body:   `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`,
	})
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())
	sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-oauth", "name": "key", "apiKey": fallbackKey, "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
	})

	resp := embed(t, sb)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1)}, tokens.grants())
	assert.Equal(t, []string{"Bearer " + oauthOldAccess, "Bearer " + fallbackKey}, bearers(up, upstreamtest.PathEmbeddings),
		"the OAuth connection first, then the fallback")

	require.Eventually(t, func() bool {
		return connection(t, sb, id)["needsRelogin"] == true
	}, 10*time.Second, 20*time.Millisecond, "the OAuth connection needs a new login")

	// Routing now skips it: no upstream call with the old token, no new
	// refresh.
	require.Equal(t, http.StatusOK, embed(t, sb).Status)
	assert.Len(t, tokens.grants(), 1)
	assert.Equal(t, []string{"Bearer " + oauthOldAccess, "Bearer " + fallbackKey, "Bearer " + fallbackKey}, bearers(up, upstreamtest.PathEmbeddings))
}

// A burst of requests refused on one token causes one refresh, and every
// request is answered.
func TestRefreshConcurrent401sRefreshOnce(t *testing.T) {
	const n = 20
	var (
		mu       sync.Mutex
		refused  int
		rejected = make(chan struct{})
	)
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess), upstreamtest.WithRequestHook(func(r upstreamtest.Request) {
		if r.Path != upstreamtest.PathEmbeddings || r.Header.Get("Authorization") != "Bearer "+oauthOldAccess {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if refused++; refused == n {
			close(rejected)
		}
	}))
	tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
	// The refresh completes only once every request has been refused, so
	// that all of them wait on it.
	tokens.gate = rejected
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())

	// nodetest's helpers require on the test goroutine; the burst uses a
	// plain client.
	client := &http.Client{Timeout: 30 * time.Second}
	body := `{"model":"` + oauthEmbedModel + `","input":"hi"}`
	results := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := client.Post(sb.BaseURL+"/v1/embeddings", "application/json", strings.NewReader(body))
			if err != nil {
				results <- err.Error()
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			results <- resp.Status + " " + string(data[:min(len(data), 200)])
		})
	}
	wg.Wait()
	close(results)
	for r := range results {
		assert.True(t, strings.HasPrefix(r, "200 "), "answer: %s", r)
	}

	assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1)}, tokens.grants(), "exactly one refresh")
	var old, fresh int
	for _, b := range bearers(up, upstreamtest.PathEmbeddings) {
		switch b {
		case "Bearer " + oauthOldAccess:
			old++
		case "Bearer " + oauthNewAccess:
			fresh++
		}
	}
	assert.Equal(t, n, old, "every request was refused on the old token")
	assert.Equal(t, n, fresh, "and retried once with the new one")
	assert.Equal(t, false, connection(t, sb, id)["needsRelogin"])
}
