package node_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// A login poll runs on past its caller, so that tokens a provider hands over
// are not lost; but a provider that never answers must not hold the
// process's shutdown: the login ends when the shutdown begins.
func TestShutdownIsNotHeldByALoginWhoseProviderHangs(t *testing.T) {
	f := newFakeAuthServer(t, pollOK)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // the provider does not answer
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	cfg := nodetest.Config(t.TempDir())
	cfg.OAuth = oauth.Overrides{"github-copilot": {"client_id": fakeClientID, "device_url": f.URL + "/device/code",
		"token_url": hang.URL + "/token", "copilot_token_url": f.URL + "/copilot_internal/v2/token"}}
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	flowID := startDevice(t, sb, "github-copilot")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.BaseURL+"/api/oauth/github-copilot/poll",
		strings.NewReader(`{"flowId":"`+flowID+`"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+nodetest.AdminToken)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the poll did not reach the provider")
	}
	cancel() // the caller leaves too
	start := time.Now()
	sb.Stop() // fails the test when the edge's drain runs out of time
	require.Less(t, time.Since(start), cfg.ShutdownTimeout, "the shutdown waited on the login")
}
