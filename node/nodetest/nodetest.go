// Package nodetest starts switchboard processes for end-to-end tests: the
// whole service in one process (as `serve` runs it) or one role at a time
// against a shared NATS server (as a split deployment runs).
package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/node"
)

// AdminToken is the admin token of every instance started here.
const AdminToken = "test-admin-token-0123456789"

// InternalToken is the internal service credential of every instance
// started here, so split roles trust each other.
const InternalToken = "test-internal-token-0123456789"

// Instance is a running switchboard process.
type Instance struct {
	Node    *node.Node
	BaseURL string // http://host:port
	Config  config.Config
	stop    func()
}

// Config returns a configuration for a test instance: random ports, a data
// directory, the test admin token.
func Config(dataDir string) config.Config {
	return config.Config{
		HTTPAddr:        "127.0.0.1:0",
		GRPCAddr:        "127.0.0.1:0",
		DataDir:         dataDir,
		AdminToken:      AdminToken,
		InternalToken:   InternalToken,
		NATSReplica:     1,
		PublicURL:       "http://127.0.0.1",
		ShutdownTimeout: 5 * time.Second,
		// Short, so a silent upstream fails over quickly in tests.
		FirstByteTimeout: 2 * time.Second,
		StallTimeout:     2 * time.Second,
		// Short, so a test can see keep-alives during a silence that stays
		// below the stall timeout.
		KeepAliveEvery: 100 * time.Millisecond,
		// Short, so a job whose worker died is redelivered within seconds
		// (10 s past it); still above the time tests hold a job open.
		JobTimeout: 5 * time.Second,
		LogLevel:   slog.LevelWarn,
		LogFormat:  "text",
	}
}

// Logger is the logger of test instances: warnings and errors, to stderr when
// SWITCHBOARD_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// Start runs a process with the given roles until the test ends (or Stop).
func Start(t testing.TB, cfg config.Config, roles ...node.Role) *Instance {
	t.Helper()
	return StartWith(t, cfg, node.Options{}, roles...)
}

// StartWith is Start with node options (a tracer provider).
func StartWith(t testing.TB, cfg config.Config, opts node.Options, roles ...node.Role) *Instance {
	t.Helper()
	n, err := node.StartWith(context.Background(), cfg, Logger(), opts, roles...)
	require.NoError(t, err, "start %v", roles)
	return Run(t, n, cfg, roles...)
}

// Run runs a started process until the test ends (or Stop).
func Run(t testing.TB, n *node.Node, cfg config.Config, roles ...node.Role) *Instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	in := &Instance{Node: n, Config: cfg}
	if addr := n.HTTPAddr(); addr != "" {
		in.BaseURL = "http://" + addr
	}
	var stopped bool
	in.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "run %v", roles)
		case <-time.After(30 * time.Second):
			t.Errorf("%v did not stop within 30s", roles)
		}
	}
	t.Cleanup(in.stop)
	return in
}

// Serve runs the whole service in one process, as `switchboard serve` does.
func Serve(t testing.TB, dataDir string) *Instance {
	return Start(t, Config(dataDir), node.AllRoles...)
}

// Stop shuts the instance down gracefully and waits for it.
func (in *Instance) Stop() { in.stop() }

// StartNATS runs a NATS server that listens on loopback, for split-mode
// tests, and returns its URL.
func StartNATS(t testing.TB) string {
	t.Helper()
	e, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: t.TempDir(), Listen: true})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	return e.ClientURL()
}

// Response is an HTTP answer with its body decoded as JSON when it is JSON.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

// Do sends a request to the instance. body may be nil, a string (sent as is)
// or a value (sent as JSON). headers are name, value pairs.
func (in *Instance) Do(t testing.TB, method, path string, body any, headers ...string) Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, in.BaseURL+path, r)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
	_ = json.Unmarshal(data, &out.JSON)
	return out
}

// Admin sends a request with the admin token.
func (in *Instance) Admin(t testing.TB, method, path string, body any, headers ...string) Response {
	t.Helper()
	return in.Do(t, method, path, body, append([]string{"Authorization", "Bearer " + AdminToken}, headers...)...)
}

// CreateConnection creates a connection through the admin API and returns its
// id.
func (in *Instance) CreateConnection(t testing.TB, conn map[string]any) string {
	t.Helper()
	resp := in.Admin(t, http.MethodPost, "/api/providers", conn)
	require.Equal(t, http.StatusCreated, resp.Status, "create connection: %s", resp.Body)
	c, ok := resp.JSON["connection"].(map[string]any)
	require.True(t, ok, "no connection in %s", resp.Body)
	return c["id"].(string)
}

// ModelIDs lists /v1/models with optional headers and returns the ids.
func (in *Instance) ModelIDs(t testing.TB, headers ...string) []string {
	t.Helper()
	resp := in.Do(t, http.MethodGet, "/v1/models", nil, headers...)
	require.Equal(t, http.StatusOK, resp.Status, "list models: %s", resp.Body)
	var ids []string
	data, _ := resp.JSON["data"].([]any)
	for _, d := range data {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	return ids
}

// ClosedURL is a loopback base URL (…/v1) nothing listens on.
func ClosedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr + "/v1"
}
