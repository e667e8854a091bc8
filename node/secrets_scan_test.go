package node_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Distinctive secrets of the scan test: none of them may be found in the
// data directory or the logs.
const (
	scanProviderKey  = "sk-prov-SCANSECRET-1f2e3d4c5b6a"
	scanOldAccess    = "at-SCANSECRET-old-77aa01"
	scanRefresh1     = "rt-SCANSECRET-one-88bb02"
	scanNewAccess    = "at-SCANSECRET-new-99cc03"
	scanRefresh2     = "rt-SCANSECRET-two-aadd04"
	scanProxyUser    = "scanuser"
	scanProxyPass    = "pp-SCANSECRET-5e6f7a8b9c"
	scanJWTSecret    = "jwt-SCANSECRET-0d1e2f3a4b5c6d7e8f90"
	scanStripeKey    = "sk_test_SCANSECRET_3c4d5e6f7a8b9c0d"
	scanStripeHook   = "whsec_SCANSECRET_9f8e7d6c5b4a"
	scanVisibleName  = "canary-SCANVISIBLE-connection"
	basicScheme      = "Basic "
	scanClientID     = "scan-client"
	scanProxiedModel = "scan/text-embedding-3-small"
)

// syncBuffer is a log sink shared by the process's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// startLogged runs every role in one process, as serve does, logging at
// debug level into logs.
func startLogged(t *testing.T, cfg config.Config, logs io.Writer) (*nodetest.Instance, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n, err := node.Start(ctx, cfg, log, node.AllRoles...)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Error("the process did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return &nodetest.Instance{Node: n, BaseURL: "http://" + n.HTTPAddr(), Config: cfg}, stop
}

// A full configuration, used: afterwards no secret configured or handed out
// is in any file of the data directory (the embedded NATS store included)
// or in the logs, and the admin API shows proxy URLs redacted.
func TestNoSecretAtRestOrInLogs(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(scanProviderKey, scanOldAccess, scanNewAccess, fakeAccess), upstreamtest.WithModels("scan-model"))
	auth := newFakeAuthServer(t, pollOK)
	auth.resourceURL = up.URL()
	dir := t.TempDir()
	secretKey := base64.StdEncoding.EncodeToString([]byte("SCANSECRET-master-key-0123456789")) // 32 bytes
	cfg := nodetest.Config(dir)
	cfg.SecretKey = secretKey
	cfg.JWTSecret = scanJWTSecret
	cfg.StripeSecretKey = scanStripeKey
	cfg.StripeWebhookSecret = scanStripeHook
	cfg.StripeAPIBase = nodetest.ClosedURL(t)
	cfg.OAuth = oauth.Overrides{"qwen": {"client_id": fakeClientID, "device_url": auth.URL + "/device/code", "token_url": auth.URL + "/token"}}
	logs := &syncBuffer{}
	sb, stop := startLogged(t, cfg, logs)

	tokens := newFakeTokenEndpoint(t, tokensAnswer(scanNewAccess, scanRefresh2))
	proxy := newAuthProxy(t, scanProxyUser, scanProxyPass)
	pu, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	pu.User = url.UserPassword(scanProxyUser, scanProxyPass)
	proxyURL := pu.String()

	// An API-key connection and an OAuth connection, both behind the proxy.
	keyConn := sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-scan", "name": scanVisibleName, "apiKey": scanProviderKey,
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "scan", "proxyUrl": proxyURL},
	})
	oauthConn := sb.CreateConnection(t, map[string]any{
		"provider": "openai-compatible-oscan", "name": "oauth", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "oscan", "proxyUrl": proxyURL},
		"oauth": map[string]any{
			"accessToken": scanOldAccess, "refreshToken": scanRefresh1,
			"tokenUrl": tokens.URL(), "clientId": scanClientID,
		},
	})
	created := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "scan"})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	gatewayKey := created.JSON["key"].(string)
	withKey := []string{"Authorization", "Bearer " + gatewayKey}

	// Requests of every kind, through the proxy and its password.
	resp := sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": scanProxiedModel, "input": "hi"}, withKey...)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.True(t, proxy.saw("POST "+up.URL()+"/embeddings"), "the proxy carried the call")
	resp = sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "scan/scan-model",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "stream": true}, withKey...)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	// The OAuth connection's token is refused once: the worker refreshes it
	// through the proxy.
	up.Enqueue(upstreamtest.PathEmbeddings, upstreamtest.Unauthorized())
	resp = sb.Do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "oscan/text-embedding-3-small", "input": "hi"}, withKey...)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Len(t, tokens.grants(), 1)
	assert.True(t, proxy.saw("POST "+tokens.URL()), "the token refresh went through the proxy")
	// The live catalogs, fetched by a worker through the proxy.
	require.Eventually(t, func() bool {
		return slices.Contains(sb.ModelIDs(t, withKey...), "scan/scan-model")
	}, 10*time.Second, 20*time.Millisecond)
	assert.True(t, proxy.saw("GET "+up.URL()+"/models"))
	test := sb.Admin(t, http.MethodPost, "/api/providers/"+keyConn+"/test", nil)
	require.Equal(t, http.StatusOK, test.Status, "%s", test.Body)
	assert.Equal(t, true, test.JSON["valid"], "%s", test.Body)
	assert.Zero(t, proxy.refusals(), "every proxied call carried the proxy's password")
	// A device login behind the proxy, and a request on its connection.
	login := sb.Admin(t, http.MethodPost, "/api/oauth/qwen/device-code", map[string]any{"name": "qwen-scan", "proxyUrl": proxyURL})
	require.Equal(t, http.StatusOK, login.Status, "%s", login.Body)
	done := poll(t, sb, "qwen", login.JSON["flowId"].(string))
	require.Equal(t, "complete", done.JSON["status"], "%s", done.Body)
	assert.True(t, proxy.saw("POST "+auth.URL+"/token"), "the login went through the proxy")
	resp = sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "qwen/qwen3-coder-plus",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}}, withKey...)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.True(t, proxy.saw("POST "+up.URL()+"/chat/completions"))
	assert.Zero(t, proxy.refusals())

	// Failures are logged too: a bad gateway key, a bad admin token.
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/v1/models", nil, "Authorization", "Bearer "+gatewayKey+"x").Status)
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/api/providers", nil, "Authorization", "Bearer "+nodetest.AdminToken+"x").Status)
	// A signed Stripe delivery (billing cannot reach Stripe: it logs that).
	payload := []byte(`{"id":"evt_scan_1","object":"event","api_version":"2023-10-16","type":"invoice.created","created":1700000000,"data":{"object":{"id":"in_scan_1","object":"invoice"}}}`)
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: payload, Secret: scanStripeHook, Timestamp: time.Now()})
	hook := sb.Do(t, http.MethodPost, "/webhooks/stripe", string(payload), "Stripe-Signature", signed.Header, "Content-Type", "application/json")
	assert.Less(t, hook.Status, 300, "%s", hook.Body)
	stats := sb.Admin(t, http.MethodGet, "/api/usage/stats?period=today", nil)
	assert.Equal(t, http.StatusOK, stats.Status)

	// The admin API shows the proxy, redacted, and no secret.
	redacted := "http://" + scanProxyUser + ":***@" + pu.Host
	for _, id := range []string{keyConn, oauthConn} {
		get := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil)
		require.Equal(t, http.StatusOK, get.Status)
		assert.Equal(t, redacted, get.JSON["connection"].(map[string]any)["providerSpecificData"].(map[string]any)["proxyUrl"])
	}
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	require.Equal(t, http.StatusOK, list.Status)

	secretsOf := map[string]string{
		"provider API key":      scanProviderKey,
		"OAuth access token":    scanOldAccess,
		"OAuth refresh token":   scanRefresh1,
		"refreshed access":      scanNewAccess,
		"refreshed refresh":     scanRefresh2,
		"login access token":    fakeAccess,
		"login refresh token":   fakeRefresh,
		"proxy password":        scanProxyPass,
		"admin token":           nodetest.AdminToken,
		"secret key":            secretKey,
		"JWT secret":            scanJWTSecret,
		"Stripe secret key":     scanStripeKey,
		"Stripe webhook secret": scanStripeHook,
		"gateway key":           gatewayKey,
		"gateway key's secret":  gatewayKey[strings.LastIndex(gatewayKey, "-")+1:],
	}
	for what, s := range secretsOf {
		assert.NotContains(t, string(list.Body), s, "%s in the connection listing", what)
	}

	stop() // everything written is on disk
	files := 0
	var visible bool
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		visible = visible || bytes.Contains(data, []byte(scanVisibleName))
		for what, s := range secretsOf {
			assert.False(t, bytes.Contains(data, []byte(s)), "%s found in %s", what, path)
		}
		return nil
	}))
	// The scan can see plain text: the store is not compressed or
	// encrypted as a whole, so a secret written plain would be found.
	assert.True(t, visible, "the connection's name was not found in any of %d files", files)
	logged := logs.Bytes()
	require.NotEmpty(t, logged)
	for what, s := range secretsOf {
		assert.False(t, bytes.Contains(logged, []byte(s)), "%s found in the logs", what)
	}
}
