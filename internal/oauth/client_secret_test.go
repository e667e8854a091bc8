package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A confidential client's secret goes with every call of its login: the
// device authorization, the device-code polls and the code exchange; a
// public client sends none.
func TestLoginCallsAuthenticateAConfidentialClient(t *testing.T) {
	var mu sync.Mutex
	var forms []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		forms = append(forms, r.PostForm)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/device" {
			_, _ = w.Write([]byte(`{"device_code":"dc","user_code":"U","verification_uri":"https://x.test/d"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"at"}`))
	}))
	t.Cleanup(srv.Close)

	for _, secret := range []string{"cs-77d1", ""} {
		mu.Lock()
		forms = nil
		mu.Unlock()
		p := Provider{ID: "kimi", ClientID: "cid", ClientSecret: secret, DeviceURL: srv.URL + "/device", TokenURL: srv.URL + "/token", TokenFormat: TokenForm}
		_, err := DeviceAuthorize(context.Background(), srv.Client(), p, "")
		require.NoError(t, err)
		_, err = PollToken(context.Background(), srv.Client(), p, "dc", "")
		require.NoError(t, err)
		_, err = ExchangeCode(context.Background(), srv.Client(), p, "code", "", "http://127.0.0.1/cb", "")
		require.NoError(t, err)
		mu.Lock()
		require.Len(t, forms, 3)
		for i, f := range forms {
			assert.Equal(t, "cid", f.Get("client_id"))
			if secret != "" {
				assert.Equal(t, secret, f.Get("client_secret"), "call %d", i)
			} else {
				assert.False(t, f.Has("client_secret"), "call %d", i)
			}
		}
		mu.Unlock()
	}
}
