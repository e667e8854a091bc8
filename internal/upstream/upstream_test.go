package upstream

import (
	"net/http"
	"net/http/httptest"
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
