package node_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// A caller that goes away while its poll completes a login the provider has
// granted does not lose the login: the device code is spent once the
// provider handed over the tokens, so the connection is made all the same,
// and the next poll answers it.
func TestOAuthLoginCompletesWhenThePollerLeaves(t *testing.T) {
	for _, step := range []string{"token", "copilot"} {
		t.Run("while the provider answers the "+step+" call", func(t *testing.T) {
			// The device code answers once: a second poll finds it spent.
			f := newFakeAuthServer(t, pollOK, oauth.CodeExpiredToken)
			arrived, release := make(chan struct{}, 1), make(chan struct{})
			gated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				// The provider answers, tokens and all, whether or not
				// core still listens.
				select {
				case <-release:
				case <-r.Context().Done():
				}
				f.Config.Handler.ServeHTTP(w, r)
			}))
			t.Cleanup(gated.Close)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			cp := map[string]string{"client_id": fakeClientID, "device_url": f.URL + "/device/code",
				"token_url": f.URL + "/token", "copilot_token_url": f.URL + "/copilot_internal/v2/token"}
			if step == "token" {
				cp["token_url"] = gated.URL + "/token"
			} else {
				cp["copilot_token_url"] = gated.URL + "/copilot_internal/v2/token"
			}
			cfg := nodetest.Config(t.TempDir())
			cfg.OAuth = oauth.Overrides{"github-copilot": cp}
			sb := nodetest.Start(t, cfg, node.AllRoles...)
			flowID := startDevice(t, sb, "github-copilot")

			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.BaseURL+"/api/oauth/github-copilot/poll",
				strings.NewReader(`{"flowId":"`+flowID+`"}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+nodetest.AdminToken)
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
				t.Fatal("the poll did not reach the provider")
			}
			cancel() // the caller leaves while the provider answers
			require.Error(t, <-done)
			close(release)

			var p nodetest.Response
			require.Eventually(t, func() bool {
				p = poll(t, sb, "github-copilot", flowID)
				return p.Status != http.StatusOK || p.JSON["status"] != "slow_down" && p.JSON["status"] != "pending"
			}, 20*time.Second, 100*time.Millisecond)
			require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
			assert.Equal(t, "complete", p.JSON["status"], "%s", p.Body)
			conns := sb.Admin(t, http.MethodGet, "/api/providers", nil)
			assert.Len(t, conns.JSON["connections"], 1, "the granted login made its connection")
		})
	}
}
