package upstream

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientsPerOriginAndProxy(t *testing.T) {
	c := NewClients(Gateway)
	a, err := c.For("https://api.example/v1", "http://proxy.example:3128")
	require.NoError(t, err)
	b, err := c.For("https://api.example/other", "http://proxy.example:3128")
	require.NoError(t, err)
	assert.Same(t, a, b, "one client per origin and proxy, reused")
	direct, err := c.For("https://api.example/v1", "")
	require.NoError(t, err)
	assert.NotSame(t, a, direct)
	other, err := c.For("https://other.example/v1", "")
	require.NoError(t, err)
	assert.NotSame(t, direct, other)
	_, err = c.For("https://api.example", "socks5h://user:pw@proxy.example:1080")
	require.NoError(t, err)

	for _, bad := range []string{"ftp://user:secret-pw@proxy.example", "http://user:secret-pw@[::1", "user:secret-pw@proxy"} {
		_, err := c.For("https://api.example", bad)
		require.Error(t, err, bad)
		assert.False(t, strings.Contains(err.Error(), "secret-pw"), "error leaks the proxy password: %v", err)
	}
	_, err = c.For("not a url", "")
	assert.Error(t, err)
}

func TestNoRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	c := NewClients(Options{NoRedirects: true})
	cl, err := c.For(srv.URL, "")
	require.NoError(t, err)
	resp, err := cl.Post(srv.URL+"/token", "text/plain", strings.NewReader("secret"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode, "the redirect is answered, not followed")
}

// A redirect within the upstream's origin is followed; one to another host
// is not, and the credential headers never reach it.
func TestRedirectsStayWithinTheOrigin(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("X-Api-Key"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/moved":
			http.Redirect(w, r, "/v1/here", http.StatusTemporaryRedirect)
		case "/v1/here":
			_, _ = w.Write([]byte("here " + r.Header.Get("X-Api-Key")))
		default:
			http.Redirect(w, r, other.URL+"/v1/messages", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	cl, err := NewClients(Gateway).For(srv.URL, "")
	require.NoError(t, err)
	post := func(path string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("X-Api-Key", "sk-secret")
		return cl.Do(req)
	}

	resp, err := post("/v1/moved")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "here sk-secret", string(body), "followed within the origin")

	_, err = post("/v1/messages")
	require.ErrorIs(t, err, ErrRedirectElsewhere)
	assert.NotContains(t, err.Error(), "sk-secret")
	assert.Empty(t, leaked, "the other host was never called")
}

// One origin however its URL spells it: the scheme's default port named or
// not, the host in any case; another port or scheme is another origin.
func TestSameOriginSpellings(t *testing.T) {
	redirect := func(from, to string) error {
		f, err := url.Parse(from)
		require.NoError(t, err)
		tu, err := url.Parse(to)
		require.NoError(t, err)
		return sameOrigin(&http.Request{URL: tu}, []*http.Request{{URL: f}})
	}
	assert.NoError(t, redirect("https://api.example/v1/a", "https://api.example:443/v1/b"))
	assert.NoError(t, redirect("http://API.example:80/v1", "http://api.example/v2"))
	assert.ErrorIs(t, redirect("https://api.example/v1", "https://api.example:8443/v1"), ErrRedirectElsewhere)
	assert.ErrorIs(t, redirect("https://api.example/v1", "http://api.example/v1"), ErrRedirectElsewhere)
	assert.ErrorIs(t, redirect("https://api.example/v1", "https://evil.example/v1"), ErrRedirectElsewhere)
}
