package tokenrefresh

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
)

const clientSecret = "cs-operator-9e41d7"

// A provider's configured client secret goes with the refresh grants of its
// connections, and only to the provider's own client at its own token
// endpoint; it shows in no log, error or stored record.
func TestRefreshSendsTheConfiguredClientSecret(t *testing.T) {
	ts := newTokenServer(t, http.StatusUnauthorized, `{"error":"invalid_client"}`)
	tokenURL := ts.URL + "/token"
	providers, err := oauth.NewProviders(oauth.Overrides{"kimi": {"client_id": "cid", "client_secret": clientSecret, "token_url": tokenURL}})
	require.NoError(t, err)

	cases := []struct {
		name       string
		provider   string
		clientID   string
		tokenURL   string
		withSecret bool
	}{
		{name: "the provider's client at its endpoint", provider: "kimi", clientID: "cid", tokenURL: tokenURL, withSecret: true},
		{name: "another token URL", provider: "kimi", clientID: "cid", tokenURL: tokenURL + "?to=elsewhere"},
		{name: "another client", provider: "kimi", clientID: "other", tokenURL: tokenURL},
		{name: "a provider without a secret", provider: "qwen", clientID: "cid", tokenURL: tokenURL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(ts.received())
			admin := newFakeAdmin(tc.tokenURL, 3)
			admin.creds.Connection.Provider = tc.provider
			admin.creds.ClientId = tc.clientID
			r, logs := newRefresher(admin)
			r.WithProviders(providers)
			err := r.Handle(context.Background(), job(3))
			require.NoError(t, err, "a refused client is recorded")

			forms := ts.received()[before:]
			require.Len(t, forms, 1)
			if tc.withSecret {
				assert.Equal(t, clientSecret, forms[0].Get("client_secret"))
			} else {
				assert.False(t, forms[0].Has("client_secret"), "the secret went to %s as %s", tc.tokenURL, tc.clientID)
			}
			assert.Equal(t, tc.clientID, forms[0].Get("client_id"))
			assert.Equal(t, oldRefresh, forms[0].Get("refresh_token"))
			assert.NotContains(t, logs.String(), clientSecret)
			for _, s := range admin.storedRequests() {
				assert.NotContains(t, s.String(), clientSecret)
			}
		})
	}
}

// Without the table (no configuration), a grant is the public client's.
func TestRefreshWithoutProvidersSendsNoSecret(t *testing.T) {
	ts := newTokenServer(t, http.StatusOK, `{"access_token":"`+newAccess+`"}`)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	r, _ := newRefresher(admin)
	require.NoError(t, r.Handle(context.Background(), job(3)))
	forms := ts.received()
	require.Len(t, forms, 1)
	assert.False(t, forms[0].Has("client_secret"))
}
