package nodetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The npm-client harness: the official `openai` npm package, pinned in
// node/testdata/node/package.json and package-lock.json, and small
// ES-module scripts there that the end-to-end tests run with node. Every
// script reads its operations as a JSON array (first argument) and prints
// one [NodeResult] per operation; see testdata/node/harness.mjs.
//
// Without node, or when the packages cannot be installed, tests skip, except
// on CI (CI=true), where they fail: CI must never skip them silently.

// harnessDir is the harness directory relative to the module root.
const harnessDir = "node/testdata/node"

var npmSetup struct {
	once sync.Once
	dir  string
	err  error // why the harness is unavailable
}

// NPM returns the harness directory after making sure its node_modules is
// installed as package-lock.json says (`npm ci`, once per process and under
// a file lock across processes, so test packages running in parallel do not
// clash). It skips the test when node or the install is unavailable, or
// fails it on CI.
func NPM(t testing.TB) string {
	t.Helper()
	npmSetup.once.Do(func() {
		npmSetup.dir, npmSetup.err = setUpNPM()
	})
	if npmSetup.err != nil {
		unavailable(t, npmSetup.err)
	}
	return npmSetup.dir
}

// unavailable skips the test, or fails it when running on CI.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("npm harness unavailable on CI: %v", err)
	}
	t.Skipf("npm harness unavailable (set CI=true to fail instead): %v", err)
}

func setUpNPM() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node not found: %w", err)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, harnessDir)
	if installed(dir) == nil {
		return dir, nil
	}
	unlock, err := lockInstall(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have installed while this one waited.
	if installed(dir) == nil {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm not found: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	if err := installed(dir); err != nil {
		return "", fmt.Errorf("after npm ci: %w", err)
	}
	return dir, nil
}

// moduleRoot finds the directory of go.mod from the working directory (a
// package directory under go test).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// installed reports why dir's node_modules does not hold exactly the
// versions package.json pins, or nil when it does.
func installed(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return err
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return fmt.Errorf("%s/package.json: %w", dir, err)
	}
	for name, want := range pkg.Dependencies {
		data, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil {
			return fmt.Errorf("%s is not installed", name)
		}
		var dep struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(data, &dep); err != nil || dep.Version != want {
			return fmt.Errorf("%s is at %q, want %q", name, dep.Version, want)
		}
	}
	return nil
}

// lockInstall takes an exclusive lock for installing in dir, shared by every
// process of this machine; the lock file lives in the temporary directory so
// the source tree stays clean.
func lockInstall(dir string) (unlock func(), err error) {
	sum := sha256.Sum256([]byte(dir))
	path := filepath.Join(os.TempDir(), "switchboard-npm-"+hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// RunNode runs script (a file name in the harness directory) with node and
// args, and returns its standard output. env is added to the environment;
// OPENAI_* variables of the test's environment are dropped so that the SDK
// reads nothing but what the test gives it. A failing script fails the
// test, with its standard error.
func RunNode(t testing.TB, script string, env map[string]string, args ...string) []byte {
	t.Helper()
	dir := NPM(t)
	timeout := 2 * time.Minute
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok && time.Until(dl) < timeout {
			timeout = max(time.Until(dl)-5*time.Second, time.Second)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "node %s: %s\nstdout: %s", script, stderr.Bytes(), stdout.Bytes())
	return stdout.Bytes()
}

// NodeClient is what the harness scripts need to reach a gateway.
type NodeClient struct {
	BaseURL string // the API base, e.g. in.BaseURL + "/v1"
	APIKey  string // empty sends no credential at all
}

// NPMClient returns a NodeClient for the instance's /v1 API with key.
func (in *Instance) NPMClient(key string) NodeClient {
	return NodeClient{BaseURL: in.BaseURL + "/v1", APIKey: key}
}

// NodeResult is the outcome of one operation of a harness script: the SDK's
// return value as JSON, or the error it threw.
type NodeResult struct {
	Result json.RawMessage `json:"result"`
	Error  *NodeError      `json:"error"`
}

// NodeError is an error thrown by the SDK.
type NodeError struct {
	Class     string            `json:"class"` // e.g. "RateLimitError", "APIConnectionError"
	Status    int               `json:"status"`
	Code      string            `json:"code"`
	Type      string            `json:"type"`
	Param     string            `json:"param"`
	Message   string            `json:"message"`
	RequestID string            `json:"requestID"`
	Headers   map[string]string `json:"headers"` // lower-case names
}

// Ops runs script with each of ops (encoded as JSON) through c and returns
// one result per operation.
func (c NodeClient) Ops(t testing.TB, script string, ops ...any) []NodeResult {
	t.Helper()
	arg, err := json.Marshal(ops)
	require.NoError(t, err)
	out := RunNode(t, script, map[string]string{
		"SWITCHBOARD_BASE_URL": c.BaseURL,
		"SWITCHBOARD_API_KEY":  c.APIKey,
	}, string(arg))
	var results []NodeResult
	require.NoError(t, json.Unmarshal(out, &results), "node %s printed %s", script, out)
	require.Len(t, results, len(ops), "node %s printed %s", script, out)
	return results
}

// Op runs script with one operation and returns its result.
func (c NodeClient) Op(t testing.TB, script string, op any) NodeResult {
	t.Helper()
	return c.Ops(t, script, op)[0]
}

// Decode unmarshals the result into v, failing the test if the operation
// failed.
func (r NodeResult) Decode(t testing.TB, v any) {
	t.Helper()
	require.Nil(t, r.Error, "the SDK threw %+v", r.Error)
	require.NoError(t, json.Unmarshal(r.Result, v), "result %s", r.Result)
}
