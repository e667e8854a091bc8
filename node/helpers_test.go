package node_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// forwardProxy is an HTTP forward proxy that records the requests it
// forwarded: "<method> <absolute URI>", as a client configured with a proxy
// sends plain-HTTP requests. With credentials (newAuthProxy) it refuses
// requests without them and counts the refusals.
type forwardProxy struct {
	*httptest.Server
	mu      sync.Mutex
	seen    []string
	refused int
}

// newRecordingProxy is a forward proxy that asks for no credentials.
func newRecordingProxy(t *testing.T) *forwardProxy {
	t.Helper()
	return newForwardProxy(t, "")
}

// newAuthProxy is a forward proxy that requires a user name and password.
func newAuthProxy(t *testing.T, user, pass string) *forwardProxy {
	t.Helper()
	return newForwardProxy(t, basicScheme+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
}

// newForwardProxy starts the proxy; want is the Proxy-Authorization it
// requires, none when empty.
func newForwardProxy(t *testing.T, want string) *forwardProxy {
	t.Helper()
	p := &forwardProxy{}
	// Forwarding goes straight to the target, whatever the environment
	// says.
	forward := &http.Transport{Proxy: nil}
	t.Cleanup(forward.CloseIdleConnections)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		if want != "" && r.Header.Get("Proxy-Authorization") != want {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			w.Header().Set("Proxy-Authenticate", `Basic realm="scan"`)
			http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
			return
		}
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+r.URL.String())
		p.mu.Unlock()
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.Header.Del("Proxy-Connection")
		out.Header.Del("Proxy-Authorization")
		resp, err := forward.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(p.Close)
	return p
}

// requests are the requests forwarded so far.
func (p *forwardProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func (p *forwardProxy) saw(req string) bool {
	return slices.Contains(p.requests(), req)
}

func (p *forwardProxy) forwarded() int {
	return len(p.requests())
}

func (p *forwardProxy) refusals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// bearers lists the Authorization headers of an upstream's requests on
// path, in order.
func bearers(up *upstreamtest.Server, path string) []string {
	var out []string
	for _, r := range up.Requests() {
		if r.Path == path {
			out = append(out, r.Header.Get("Authorization"))
		}
	}
	return out
}

// leaveAfterFirstChunk streams a chat of openai/gpt-4o-mini, reads up to
// its first chunk and goes away: the client hangs up mid-stream.
func leaveAfterFirstChunk(t *testing.T, sb *nodetest.Instance) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"model":"openai/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.BaseURL+pathChat, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			break
		}
	}
	cancel()
	resp.Body.Close()
}

// connectionWithout reads a connection through the admin API and checks
// that none of secrets is in the answer.
func connectionWithout(t *testing.T, sb *nodetest.Instance, id string, secrets ...string) map[string]any {
	t.Helper()
	get := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil)
	require.Equal(t, http.StatusOK, get.Status, "%s", get.Body)
	for _, secret := range secrets {
		require.NotContains(t, string(get.Body), secret, "secrets never come back")
	}
	c, ok := get.JSON["connection"].(map[string]any)
	require.True(t, ok, "%s", get.Body)
	return c
}

// stallingLink is a TCP relay to a NATS server whose traffic can be held
// up, both ways, as a loaded machine's link may be for a moment.
type stallingLink struct {
	ln      net.Listener
	mu      sync.RWMutex // held while stalled: relays wait before they write
	stateMu sync.Mutex
	stalled bool
}

func newStallingLink(t *testing.T, natsURL string) *stallingLink {
	t.Helper()
	target := strings.TrimPrefix(natsURL, "nats://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &stallingLink{ln: ln}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, s)
			mu.Unlock()
			conns.Add(2)
			go func() { defer conns.Done(); l.relay(s, c) }()
			go func() { defer conns.Done(); l.relay(c, s) }()
		}
	}()
	t.Cleanup(func() {
		l.Resume()
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return l
}

// URL is the NATS URL to connect through the link.
func (l *stallingLink) URL() string { return "nats://" + l.ln.Addr().String() }

// Stall holds up what either side sends until Resume.
func (l *stallingLink) Stall() {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if !l.stalled {
		l.mu.Lock()
		l.stalled = true
	}
}

// Resume lets the held traffic through.
func (l *stallingLink) Resume() {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if l.stalled {
		l.mu.Unlock()
		l.stalled = false
	}
}

func (l *stallingLink) relay(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.RLock()
			_, werr := dst.Write(buf[:n])
			l.mu.RUnlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
