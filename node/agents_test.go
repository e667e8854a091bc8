package node_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The real coding agents, pinned from npm and installed by .ci/run into
// .ci/.tools/agents (SWITCHBOARD_AGENTS_DIR overrides), run headless against
// serve. Without them the tests skip, except on CI (CI=true), where they fail.

// agentBin returns the path of a pinned agent CLI.
func agentBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("SWITCHBOARD_AGENTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".ci", ".tools", "agents")
	}
	bin, err := filepath.Abs(filepath.Join(dir, "node_modules", ".bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed in %s on CI: %v", name, dir, err)
		}
		t.Skipf("%s is not installed in %s (run .ci/run, or set SWITCHBOARD_AGENTS_DIR; CI=true fails instead): %v", name, dir, err)
	}
	return bin
}

// runAgent runs bin with args in a clean environment: a fresh HOME, PATH,
// and env; nothing else of the test's environment (no real keys) leaks in.
func runAgent(t *testing.T, home, bin string, env map[string]string, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := runAgentFailing(t, home, bin, env, args...)
	require.NoError(t, err, "%s %v\nstdout: %s\nstderr: %s", filepath.Base(bin), args, stdout, stderr)
	return stdout, stderr
}

// runAgentFailing is runAgent for a run that may end in failure: its error
// is returned.
func runAgentFailing(t *testing.T, home, bin string, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb", "NO_COLOR=1"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = bytes.NewReader(nil)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}
