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
	"os/exec"
	"path/filepath"
	"time"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

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

// restAfter is how long after ready the gateway's memory at rest is read.
const restAfter = 3 * time.Second

// fixture is the system under test: a fake upstream in this process (with
// the load client), and two processes in front of it on loopback: the bare
// reverse proxy (this program re-executed) and the gateway (the switchboard
// binary's serve command).
type fixture struct {
	upstream   *upstreamtest.Server
	proxy      *child
	gateway    *child
	gatewayURL string // http://127.0.0.1:port
	apiKey     string // a gateway API key of the default machine
	catalogKey string // a gateway API key of the catalog machine

	// Start-up figures of the gateway: exec to the line announcing its
	// address, exec to the first 200 of /readyz, resident memory at rest
	// (configured, before any load), and peak before the load.
	readyLine, readyHTTP time.Duration
	restKB, restHWMKB    int64

	debugAddr string // the gateway's pprof listener, if asked for
	dataDir   string
	tmpDir    string
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// fetchProfile saves the gateway's named pprof profile (heap, allocs) to
// path.
func (f *fixture) fetchProfile(ctx context.Context, name, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.debugAddr+"/debug/pprof/"+name, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s profile: %s", name, resp.Status)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// fixtureOptions are how the gateway is run and observed.
type fixtureOptions struct {
	dims     int
	serveBin string // a switchboard binary; empty: `go build` one
	// profiles: where the gateway writes its CPU profile, and where its
	// heap and allocation profiles (fetched at the end) and GC trace go;
	// empty: not taken.
	cpuProfile, heapProfile, allocProfile, gcTrace string
	stderr                                         io.Writer // the gateway's log (warnings), or nil
}

// startFixture starts the fake upstream, the proxy and the gateway, and
// creates the connection to the fake and an API key through the admin API.
func startFixture(ctx context.Context, o fixtureOptions, logger *slog.Logger) (_ *fixture, err error) {
	// f is not the result: the error returns below set the result to nil
	// before this cleanup runs, and what was started must still stop.
	f := &fixture{}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	f.upstream = upstreamtest.NewServer(upstreamtest.WithoutRecording(), upstreamtest.WithEmbeddingDims(o.dims))
	if err := requireLoopback(f.upstream.URL()); err != nil {
		return nil, err
	}
	f.tmpDir, err = os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return nil, err
	}
	if f.proxy, err = startProxy(ctx, f.upstream.URL()); err != nil {
		return nil, fmt.Errorf("start the proxy: %w", err)
	}
	bin := o.serveBin
	if bin == "" {
		logger.Info("building the switchboard binary")
		if bin, err = buildServe(ctx, f.tmpDir); err != nil {
			return nil, err
		}
	}
	f.dataDir = filepath.Join(f.tmpDir, "data")
	adminToken := "bench-" + rand.Text()
	cmd := exec.Command(bin, "serve")
	env := append(os.Environ(),
		"SWITCHBOARD_HTTP_ADDR=127.0.0.1:0",
		"SWITCHBOARD_GRPC_ADDR=127.0.0.1:0",
		"SWITCHBOARD_DATA_DIR="+f.dataDir,
		"SWITCHBOARD_ADMIN_TOKEN="+adminToken,
		"SWITCHBOARD_PUBLIC_URL=http://127.0.0.1",
		"SWITCHBOARD_LOG_LEVEL=warn",
		"SWITCHBOARD_SHUTDOWN_TIMEOUT=5s",
	)
	var gcTrace *os.File
	if o.cpuProfile != "" {
		abs, err := filepath.Abs(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		env = append(env, "SWITCHBOARD_CPU_PROFILE="+abs)
	}
	if o.heapProfile != "" || o.allocProfile != "" {
		if f.debugAddr, err = freeLoopbackAddr(); err != nil {
			return nil, err
		}
		env = append(env, "SWITCHBOARD_DEBUG_ADDR="+f.debugAddr)
	}
	stderr := o.stderr
	if o.gcTrace != "" {
		env = append(env, "GODEBUG=gctrace=1")
		if gcTrace, err = os.Create(o.gcTrace); err != nil {
			return nil, err
		}
		stderr = gcTrace // gctrace lines and the log both
	}
	cmd.Env = env
	f.gateway, err = startChild(ctx, "switchboard serve", cmd, "OpenAI-compatible API at ", stderr)
	if err != nil {
		return nil, err
	}
	f.readyLine = f.gateway.ready
	f.gatewayURL = f.gateway.url
	if err := f.waitReady(ctx); err != nil {
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

// waitReady waits (at most 30 s) for the gateway's /readyz to answer 200,
// then measures its memory at rest a second later.
func (f *fixture) waitReady(ctx context.Context) error {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	t0 := time.Now().Add(-f.readyLine) // about the exec
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.gatewayURL+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				f.readyHTTP = time.Since(t0)
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway was not ready within 30s: %s", f.gateway.stderr.String())
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// At rest: past the second after ready at which the gateway gives back
	// the executable pages its start touched (main.releaseAfter), and past
	// the background work that follows it.
	select {
	case <-time.After(restAfter):
	case <-ctx.Done():
		return ctx.Err()
	}
	if st, ok := readProc(f.gateway.pid()); ok {
		f.restKB, f.restHWMKB = st.rssKB, st.hwmKB
	}
	return nil
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

// close stops the gateway (waiting for it to drain, at most 30 s), the
// proxy and the fake, and removes the temporary directory.
func (f *fixture) close() error {
	var err error
	if f.gateway != nil {
		err = f.gateway.stop(30 * time.Second)
		f.gateway = nil
	}
	if f.proxy != nil {
		err = errors.Join(err, f.proxy.stop(10*time.Second))
		f.proxy = nil
	}
	if f.upstream != nil {
		f.upstream.Close()
		f.upstream = nil
	}
	if f.tmpDir != "" {
		err = errors.Join(err, os.RemoveAll(f.tmpDir))
		f.tmpDir = ""
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
