package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/edge/internal/console"
)

func TestHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /ui", console.Handler())
	mux.Handle("GET /ui/", console.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	cases := []struct {
		path        string
		status      int
		contentType string
		body        string
	}{
		{"/ui/", http.StatusOK, "text/html", `<script type="module" src="app.js"></script>`},
		{"/ui/app.js", http.StatusOK, "text/javascript", "import"},
		{"/ui/charts.js", http.StatusOK, "text/javascript", "createElementNS"},
		{"/ui/app.css", http.StatusOK, "text/css", ":root"},
		{"/ui/billing.js", http.StatusOK, "text/javascript", "/api/billing/dead-letters"},
		{"/ui/missing.js", http.StatusNotFound, "", ""},
		{"/ui", http.StatusMovedPermanently, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := noFollow.Get(srv.URL + tc.path)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, console.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"), "every answer carries the CSP")
			assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
			if tc.contentType != "" {
				assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), tc.contentType), resp.Header.Get("Content-Type"))
			}
			assert.Contains(t, string(body), tc.body)
			if tc.status == http.StatusMovedPermanently {
				assert.Equal(t, "/ui/", resp.Header.Get("Location"))
			}
		})
	}
	assert.NotContains(t, console.ContentSecurityPolicy, "unsafe-inline")
}
