package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"time"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
)

// profileLabel is the profiler label that tells the load client, the fake
// upstream and the gateway apart in a CPU profile.
const profileLabel = "bench"

// Names the fixture gives to what it creates, and the models the workloads
// name: the upstream's own model id directly, "openai/<id>" through the
// gateway (the connection has the openai provider and no prefix).
const (
	connectionName     = "bench"
	upstreamKey        = "sk-bench"
	upstreamEmbedModel = "text-embedding-3-small"
	upstreamChatModel  = "gpt-4o-mini" // the fake's default models include it
	gatewayPrefix      = "openai/"
)

// The catalog machine: a second machine (tenant) holding catalogConnections
// connections of catalogModels enabled models each, for the models
// workload. Being another machine, its connections never take part in the
// routing of the other workloads, which use the default machine.
const (
	catalogMachineName = "bench-catalog"
	catalogConnections = 100
	catalogModels      = 50 // per connection
)

// fixture is the system under test: a fake upstream and a switchboard
// process serving every role, both in this process on loopback.
type fixture struct {
	upstream   *upstreamtest.Server
	gatewayURL string // http://127.0.0.1:port
	apiKey     string // a gateway API key of the default machine
	catalogKey string // a gateway API key of the catalog machine

	cancel  context.CancelFunc
	done    chan error
	dataDir string
}

// startFixture starts the fake upstream and the gateway, and creates the
// connection to the fake and an API key through the admin API.
func startFixture(ctx context.Context, dims int, logger *slog.Logger) (f *fixture, err error) {
	f = &fixture{}
	defer func() {
		if err != nil {
			f.close()
			f = nil
		}
	}()
	// Goroutines inherit profiler labels: with -cpuprofile, `go tool pprof
	// -tagfocus bench=gateway` shows the gateway alone.
	pprof.Do(ctx, pprof.Labels(profileLabel, "upstream"), func(context.Context) {
		f.upstream = upstreamtest.NewServer(upstreamtest.WithoutRecording(), upstreamtest.WithEmbeddingDims(dims))
	})
	if err := requireLoopback(f.upstream.URL()); err != nil {
		return nil, err
	}

	f.dataDir, err = os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return nil, err
	}
	adminToken := "bench-" + rand.Text()
	cfg := config.Config{
		HTTPAddr:        "127.0.0.1:0",
		GRPCAddr:        "127.0.0.1:0",
		DataDir:         f.dataDir,
		AdminToken:      adminToken,
		NATSReplica:     1,
		PublicURL:       "http://127.0.0.1",
		ShutdownTimeout: 5 * time.Second,
		LogLevel:        slog.LevelWarn,
		LogFormat:       "text",
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var n *node.Node
	pprof.Do(runCtx, pprof.Labels(profileLabel, "gateway"), func(runCtx context.Context) {
		n, err = node.Start(runCtx, cfg, logger, node.AllRoles...)
		if err != nil {
			return
		}
		f.done = make(chan error, 1)
		go func() { f.done <- n.Run(runCtx) }()
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start the gateway: %w", err)
	}
	f.cancel = cancel
	f.gatewayURL = "http://" + n.HTTPAddr()
	if err := requireLoopback(f.gatewayURL); err != nil {
		return nil, err
	}

	admin := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer admin.CloseIdleConnections()
	var conn struct {
		Connection struct {
			ID string `json:"id"`
		} `json:"connection"`
	}
	err = f.admin(ctx, admin, adminToken, "/api/providers", map[string]any{
		"provider": "openai", "name": connectionName, "apiKey": upstreamKey,
		"providerSpecificData": map[string]any{"baseUrl": f.upstream.URL()},
	}, &conn)
	if err != nil {
		return nil, fmt.Errorf("create the connection: %w", err)
	}
	if conn.Connection.ID == "" {
		return nil, errors.New("create the connection: no id in the answer")
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := f.admin(ctx, admin, adminToken, "/api/keys", map[string]any{"name": connectionName}, &key); err != nil {
		return nil, fmt.Errorf("create an API key: %w", err)
	}
	if key.Key == "" {
		return nil, errors.New("create an API key: no key in the answer")
	}
	f.apiKey = key.Key
	if f.catalogKey, err = f.createCatalog(ctx, admin, adminToken); err != nil {
		return nil, fmt.Errorf("create the catalog machine: %w", err)
	}
	return f, nil
}

// createCatalog creates the catalog machine, its connections and an API key
// of it, and returns the key. Each connection has its own prefix
// ("bench-c000" to "bench-c099"), so its models' public ids
// ("bench-c000/bench-model-00") are distinct; with enabledModels set, no
// upstream is ever asked for its models.
func (f *fixture) createCatalog(ctx context.Context, c *http.Client, token string) (string, error) {
	var m struct {
		Machine struct {
			ID string `json:"id"`
		} `json:"machine"`
	}
	if err := f.admin(ctx, c, token, "/api/machines", map[string]any{"name": catalogMachineName}, &m); err != nil {
		return "", err
	}
	if m.Machine.ID == "" {
		return "", errors.New("no machine id in the answer")
	}
	models := make([]string, catalogModels)
	for i := range models {
		models[i] = fmt.Sprintf("bench-model-%02d", i)
	}
	for i := range catalogConnections {
		prefix := fmt.Sprintf("bench-c%03d", i)
		var conn struct{}
		err := f.admin(ctx, c, token, "/api/providers", map[string]any{
			"provider": "openai", "name": prefix, "apiKey": upstreamKey,
			"providerSpecificData": map[string]any{"baseUrl": f.upstream.URL(), "prefix": prefix, "enabledModels": models},
		}, &conn, "X-Switchboard-Machine", m.Machine.ID)
		if err != nil {
			return "", fmt.Errorf("connection %s: %w", prefix, err)
		}
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := f.admin(ctx, c, token, "/api/keys", map[string]any{"name": catalogMachineName}, &key, "X-Switchboard-Machine", m.Machine.ID); err != nil {
		return "", fmt.Errorf("API key: %w", err)
	}
	if key.Key == "" {
		return "", errors.New("API key: no key in the answer")
	}
	return key.Key, nil
}

// admin POSTs body to an admin route, with the given extra header name and
// value pairs, and decodes the 201 answer into out.
func (f *fixture) admin(ctx context.Context, c *http.Client, token, path string, body, out any, header ...string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.gatewayURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// close stops the gateway (waiting for it to drain, at most 30 s) and the
// fake, and removes the data directory.
func (f *fixture) close() error {
	var err error
	if f.cancel != nil {
		f.cancel()
		select {
		case err = <-f.done:
		case <-time.After(30 * time.Second):
			err = errors.New("the gateway did not stop within 30s")
		}
	}
	if f.upstream != nil {
		f.upstream.Close()
	}
	if f.dataDir != "" {
		err = errors.Join(err, os.RemoveAll(f.dataDir))
	}
	return err
}

// requireLoopback refuses to load anything but this machine.
func requireLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to load %s: not a loopback address", raw)
	}
	return nil
}
