package nodetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ChromiumPath is Debian's chromium, which the console tests drive.
const ChromiumPath = "/usr/bin/chromium"

// consoleShotsEnv names a directory for the console's screenshots (test
// artefacts); without it they go to a temporary directory.
const consoleShotsEnv = "SWITCHBOARD_CONSOLE_SCREENSHOTS"

// Browser is a headless chromium driven through node/testdata/node/console.mjs,
// one JSON command a line (its ops: goto, click, fill, wait, focused, hold,
// release, ...).
type Browser struct {
	t     *testing.T
	in    io.WriteCloser
	out   *bufio.Scanner
	shots string
}

// StartBrowser starts a browser for the test, closed when it ends. Without
// chromium the test skips, or fails on CI (CI=true).
func StartBrowser(t *testing.T) *Browser {
	t.Helper()
	dir := NPM(t)
	if _, err := os.Stat(ChromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is missing on CI: %v", err)
		}
		t.Skipf("chromium not installed (apt-get install chromium; CI=true fails instead): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", "console.mjs")
	cmd.Dir = dir
	cmd.Stderr = &testWriter{t: t}
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_, _ = io.WriteString(in, `{"op":"close"}`+"\n")
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	shots := os.Getenv(consoleShotsEnv)
	if shots == "" {
		shots = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(shots, 0o755))
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	return &Browser{t: t, in: in, out: sc, shots: shots}
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("browser: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Try runs one command and answers its value or error.
func (b *Browser) Try(cmd map[string]any) (any, error) {
	b.t.Helper()
	line, err := json.Marshal(cmd)
	require.NoError(b.t, err)
	_, err = b.in.Write(append(line, '\n'))
	require.NoError(b.t, err)
	type answer struct {
		OK    bool   `json:"ok"`
		Value any    `json:"value"`
		Error string `json:"error"`
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		if b.out.Scan() {
			_ = json.Unmarshal(b.out.Bytes(), &a)
		} else {
			a.Error = "the browser driver exited"
		}
		got <- a
	}()
	select {
	case a := <-got:
		if !a.OK {
			return nil, errors.New(a.Error)
		}
		return a.Value, nil
	case <-time.After(90 * time.Second):
		b.t.Fatalf("the browser did not answer %s", line)
		return nil, nil
	}
}

// Do runs a command that must succeed; on failure it saves a screenshot.
func (b *Browser) Do(cmd map[string]any) any {
	b.t.Helper()
	v, err := b.Try(cmd)
	if err != nil {
		path := filepath.Join(b.shots, "failure.png")
		_, _ = b.Try(map[string]any{"op": "screenshot", "path": path})
		problems, _ := b.Try(map[string]any{"op": "problems"})
		b.t.Fatalf("browser %v: %v (screenshot %s; page problems %v)", cmd, err, path, problems)
	}
	return v
}

// Text is the text of the page's main content.
func (b *Browser) Text() string { return b.Do(map[string]any{"op": "text"}).(string) }

// GoTo loads url.
func (b *Browser) GoTo(url string) { b.Do(map[string]any{"op": "goto", "url": url}) }

// WaitText waits until text shows.
func (b *Browser) WaitText(text string) {
	b.t.Helper()
	b.Do(map[string]any{"op": "wait", "text": text})
}

// Click clicks the element of that role and accessible name (within a
// selector, when given).
func (b *Browser) Click(role, name string, within ...string) {
	b.t.Helper()
	cmd := map[string]any{"op": "click", "role": role, "name": name}
	if len(within) > 0 {
		cmd["within"] = within[0]
	}
	b.Do(cmd)
}

// Fill types value into the field of that label.
func (b *Browser) Fill(label, value string) {
	b.t.Helper()
	b.Do(map[string]any{"op": "fill", "label": label, "value": value})
}

// Shot saves a screenshot named name.
func (b *Browser) Shot(name string) {
	b.t.Helper()
	path := filepath.Join(b.shots, name+".png")
	b.Do(map[string]any{"op": "screenshot", "path": path})
	b.t.Logf("screenshot %s", path)
}
