package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// roleEnv, when set in the environment, makes this program run as one of
// the processes a run starts instead of a run: "proxy" is the bare
// httputil.ReverseProxy every gateway is compared with. An environment
// variable rather than a flag, so that the test binary (which runs
// TestMain, not main) can be re-executed the same way.
const roleEnv = "SWITCHBOARD_BENCH_ROLE"

// proxyTargetEnv is the upstream base URL of the proxy role.
const proxyTargetEnv = "SWITCHBOARD_BENCH_PROXY_TARGET"

// listenLine starts the line a child prints on stdout once it accepts
// connections; the rest of the line is its base URL.
const listenLine = "bench proxy at "

// runRole runs the role named in the environment, if any, and reports
// whether it did (its exit status in code).
func runRole() (code int, ran bool) {
	switch os.Getenv(roleEnv) {
	case "":
		return 0, false
	case "proxy":
		if err := serveProxy(os.Getenv(proxyTargetEnv), os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench proxy: %v\n", err)
			return exitSetup, true
		}
		return exitOK, true
	default:
		fmt.Fprintf(os.Stderr, "bench: unknown %s %q\n", roleEnv, os.Getenv(roleEnv))
		return exitSetup, true
	}
}

// serveProxy is the bare reverse proxy: the standard library's
// httputil.ReverseProxy with one transport that keeps enough idle
// connections for the load (the default keeps 2 per host), on a random
// loopback port, until SIGTERM.
func serveProxy(target string, stdout io.Writer) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s: not a URL: %q", proxyTargetEnv, target)
	}
	if err := requireLoopback(target); err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	// The clients call /v1/...; the fake serves the same paths without /v1.
	inner := rp.Director
	rp.Director = func(r *http.Request) {
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/v1")
		inner(r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// Full duplex: the HTTP/1 server would otherwise close the inbound
	// body once the answer's headers are written, while the transport may
	// still read it (to check it was not longer than declared), and the
	// connection to the upstream, the answer with it, would be cut
	// (golang/go#40747).
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "%shttp://%s\n", listenLine, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	ctx, stop := signalContext()
	defer stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}

// child is a process the run started: the proxy or the gateway.
type child struct {
	name string
	cmd  *exec.Cmd
	url  string // its HTTP base URL, without /v1
	// ready is the time from exec to the line announcing its address.
	ready time.Duration
	// stdoutDone is closed once its stdout is drained.
	stdoutDone chan struct{}
	stderr     *tailBuffer
}

// startChild starts cmd and waits (at most 30 s) for a stdout line that
// starts with prefix, whose rest (up to the first space or the end) is
// taken as its base URL, trimmed of a trailing "/v1".
func startChild(ctx context.Context, name string, cmd *exec.Cmd, prefix string, stderr io.Writer) (*child, error) {
	c := &child{name: name, cmd: cmd, stdoutDone: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if stderr != nil {
		cmd.Stderr = io.MultiWriter(stderr, c.stderr)
	} else {
		cmd.Stderr = c.stderr
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	found := make(chan string, 1)
	go func() {
		defer close(c.stdoutDone)
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, prefix); i >= 0 && !sent {
				rest := line[i+len(prefix):]
				rest, _, _ = strings.Cut(rest, " ")
				found <- strings.TrimSuffix(strings.TrimSuffix(rest, "/"), "/v1")
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case u, ok := <-found:
		if !ok {
			c.kill()
			return nil, fmt.Errorf("%s exited before announcing its address: %s", name, c.stderr.String())
		}
		c.ready = time.Since(start)
		c.url = u
	case <-timer.C:
		c.kill()
		return nil, fmt.Errorf("%s did not announce its address within 30s: %s", name, c.stderr.String())
	case <-ctx.Done():
		c.kill()
		return nil, ctx.Err()
	}
	if err := requireLoopback(c.url); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// stop asks the child to stop (SIGTERM) and waits at most grace for it.
func (c *child) stop(grace time.Duration) error {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.kill()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w: %s", c.name, err, c.stderr.String())
		}
		return nil
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not stop within %s", c.name, grace)
	}
}

// startProxy starts the bare reverse proxy in front of upstream, as this
// program re-executed in the proxy role.
func startProxy(ctx context.Context, upstream string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"=proxy", proxyTargetEnv+"="+upstream, "GODEBUG=")
	return startChild(ctx, "proxy", cmd, listenLine, nil)
}

// buildServe builds the switchboard binary into dir with `go build`.
func buildServe(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "switchboard")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/switchboardhq/switchboard")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build switchboard: %w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return bin, nil
}

// procStat is what /proc tells of a process.
type procStat struct {
	cpu   time.Duration // utime + stime
	hwmKB int64         // VmHWM: peak resident set
	rssKB int64         // VmRSS: resident set now
}

// readProc reads /proc/<pid>/stat and status; ok is false where there is
// no /proc.
func readProc(pid int) (procStat, bool) {
	var s procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return s, false
	}
	f := bytes.Fields(b[i+1:])
	// After the name: state is field 3, utime field 14, stime field 15.
	if len(f) < 13 {
		return s, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return s, false
	}
	const userHZ = 100
	s.cpu = time.Duration(ut+st) * (time.Second / userHZ)
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, false
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			s.hwmKB = parseKB(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			s.rssKB = parseKB(v)
		}
	}
	return s, true
}

// resetPeak sets the process's VmHWM back to its resident set now (Linux:
// 5 written to /proc/<pid>/clear_refs), so that a later VmHWM is the peak
// since this call; false where the platform does not allow it.
func resetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

func parseKB(v []byte) int64 {
	f := bytes.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return n
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// signalContext is done on SIGTERM or an interrupt.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
