package node_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

const allowedOrigin = "https://app.example"

// trustGateway is a serve instance (configured by tune) with a primary and
// a fallback OpenAI connection to fake upstreams, and an API key.
type trustGateway struct {
	sb                *nodetest.Instance
	primary, fallback *upstreamtest.Server
	key               string
}

func newTrustGateway(t *testing.T, tune func(*config.Config)) trustGateway {
	t.Helper()
	cfg := nodetest.Config(t.TempDir())
	cfg.CORSOrigins = []string{allowedOrigin}
	if tune != nil {
		tune(&cfg)
	}
	g := trustGateway{
		sb:       nodetest.Start(t, cfg, node.AllRoles...),
		primary:  upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithAPIKey("sk-primary")),
		fallback: upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithAPIKey("sk-fallback")),
	}
	g.sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "primary", "apiKey": "sk-primary", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": g.primary.URL()}})
	g.sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "fallback", "apiKey": "sk-fallback", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": g.fallback.URL()}})
	k := g.sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "trust"})
	require.Equal(t, http.StatusCreated, k.Status, "%s", k.Body)
	g.key = k.JSON["key"].(string)
	return g
}

func (g trustGateway) upstreamCalls() int {
	return len(g.primary.Requests()) + len(g.fallback.Requests())
}

// TestBrowsersLetInOnlyOnPurpose: a web page without a key cannot spend a
// default install's credentials (no key required), whatever it sends; a
// keyed request is served from any origin; SDKs and curl (no Origin) are
// unaffected; an allowed origin is served without a key.
func TestBrowsersLetInOnlyOnPurpose(t *testing.T) {
	g := newTrustGateway(t, nil)
	embed := `{"model":"` + embedModel + `","input":"hello"}`
	const evil = "https://evil.example"

	t.Run("keyless text/plain from a foreign page", func(t *testing.T) {
		r := g.sb.Do(t, http.MethodPost, pathEmbed, embed, "Content-Type", "text/plain", "Origin", evil)
		assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
		assert.Equal(t, "origin_not_allowed", errorCode(r))
		assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
		r = g.sb.Do(t, http.MethodPost, pathChat, `{"model":"`+chatModel+`","messages":[{"role":"user","content":"hi"}]}`, "Content-Type", "text/plain", "Origin", evil)
		assert.Equal(t, http.StatusUnauthorized, r.Status)
		r = g.sb.Do(t, http.MethodGet, "/v1/models", nil, "Origin", evil)
		assert.Equal(t, http.StatusUnauthorized, r.Status)
		assert.Zero(t, g.upstreamCalls(), "no upstream spent")
	})
	t.Run("keyless preflight from a foreign page", func(t *testing.T) {
		r := g.sb.Do(t, http.MethodOptions, pathEmbed, nil, "Origin", evil,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
		assert.NotEqual(t, http.StatusNoContent, r.Status)
		assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"), "keyless cross-origin is not granted")
	})
	t.Run("keyed from any origin", func(t *testing.T) {
		r := g.sb.Do(t, http.MethodOptions, pathEmbed, nil, "Origin", evil,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
		assert.Equal(t, http.StatusNoContent, r.Status)
		assert.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
		r = g.sb.Do(t, http.MethodPost, pathEmbed, embed, "Origin", evil, "Authorization", "Bearer "+g.key)
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
		r = g.sb.Do(t, http.MethodPost, pathEmbed, embed, "Origin", evil, "Authorization", "Bearer sb-not-a-real-key-000000")
		assert.Equal(t, http.StatusUnauthorized, r.Status, "a key that is sent is checked")
		r = g.sb.Do(t, http.MethodPost, pathEmbed, embed, "Origin", evil, "Authorization", "Bearer ")
		assert.Equal(t, http.StatusUnauthorized, r.Status, "an empty key is no key")
	})
	t.Run("no origin: SDKs and curl", func(t *testing.T) {
		r := g.sb.Do(t, http.MethodPost, pathEmbed, embed)
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Contains(t, r.Header.Values("Vary"), "Origin", "caches keep answers for pages apart")
	})
	t.Run("allowed origin", func(t *testing.T) {
		r := g.sb.Do(t, http.MethodPost, pathEmbed, embed, "Origin", allowedOrigin)
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, allowedOrigin, r.Header.Get("Access-Control-Allow-Origin"))
		r = g.sb.Do(t, http.MethodOptions, pathEmbed, nil, "Origin", allowedOrigin, "Access-Control-Request-Method", "POST")
		assert.Equal(t, http.StatusNoContent, r.Status)
		before := g.upstreamCalls()
		r = g.sb.Do(t, http.MethodPost, pathEmbed, embed, "Origin", allowedOrigin, "Content-Type", "text/plain")
		assert.Equal(t, http.StatusUnsupportedMediaType, r.Status, "a page's body must say it is JSON")
		assert.Equal(t, before, g.upstreamCalls())
	})
}

// rawRequest writes a request's head on a new connection and returns it.
func rawRequest(t *testing.T, sb *nodetest.Instance, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(sb.BaseURL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = io.WriteString(c, head)
	require.NoError(t, err)
	return c
}

// readResponse reads an HTTP response from c (a deadline stops a test that
// would otherwise hang on a server that never answers).
func readResponse(t *testing.T, c net.Conn) (*http.Response, []byte, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b, nil
}

// TestKeyCheckedBeforeBody: with REQUIRE_API_KEY, a request without a
// well-formed key is refused before its (31 MB, never sent) body is read.
func TestKeyCheckedBeforeBody(t *testing.T) {
	g := newTrustGateway(t, func(c *config.Config) { c.RequireAPIKey = true })
	for name, auth := range map[string]string{"no key": "", "malformed key": "Authorization: Bearer " + strings.Repeat("k", 1000) + "\r\n"} {
		t.Run(name, func(t *testing.T) {
			c := rawRequest(t, g.sb, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
				auth+"Content-Length: 31000000\r\n\r\n")
			resp, body, err := readResponse(t, c)
			require.NoError(t, err, "answered without the body")
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
			assert.Contains(t, string(body), `"authentication_error"`)
		})
	}
	r := g.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "x"}, "Authorization", "Bearer "+g.key)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

// TestSlowBodies: a client trickling its body is cut off; a slow but steady
// upload, longer than the grace period, is served.
func TestSlowBodies(t *testing.T) {
	g := newTrustGateway(t, func(c *config.Config) {
		c.BodyGrace = time.Second
		c.MinBodyRate = 4 << 10
	})

	t.Run("trickle cut off", func(t *testing.T) {
		const size = 1000
		c := rawRequest(t, g.sb, fmt.Sprintf("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", g.key, size))
		answered := make(chan *http.Response, 1)
		go func() {
			resp, _, err := readResponse(t, c)
			if err != nil {
				resp = nil
			}
			answered <- resp
		}()
		sent := 0
		// One byte every 300 ms: cut off after about the grace period
		// (1 s), long before the 60th byte (18 s), let alone the whole body.
		for ; sent < 60; sent++ {
			if _, err := c.Write([]byte{' '}); err != nil {
				break
			}
			select {
			case resp := <-answered:
				require.NotNil(t, resp, "answered, not just dropped")
				assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
				assert.Less(t, sent, size, "cut off before the body was sent")
				assert.Zero(t, g.upstreamCalls())
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
		t.Fatalf("the trickling client was not cut off after %d bytes", sent)
	})

	t.Run("slow but steady upload served", func(t *testing.T) {
		audio := wav(1.5) // 48 KB at 16 KiB/s: three times the grace period, four times the minimum rate
		ct, form := multipartFormBody(t, audio, "model", sttModel)
		pr, pw := io.Pipe()
		go func() {
			for b := form; len(b) > 0; {
				n := min(len(b), 2<<10)
				if _, err := pw.Write(b[:n]); err != nil {
					return
				}
				b = b[n:]
				time.Sleep(125 * time.Millisecond)
			}
			_ = pw.Close()
		}()
		req, err := http.NewRequest(http.MethodPost, g.sb.BaseURL+"/v1/audio/transcriptions", pr)
		require.NoError(t, err)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+g.key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Contains(t, string(body), upstreamtest.Transcript(audio))
	})
}

func multipartFormBody(t *testing.T, file []byte, fields ...string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, err := mw.CreateFormFile("file", "speech.wav")
	require.NoError(t, err)
	_, _ = w.Write(file)
	for i := 0; i+1 < len(fields); i += 2 {
		require.NoError(t, mw.WriteField(fields[i], fields[i+1]))
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

// TestBodyMemoryBounded: sixteen clients each send 7 MiB of an 8 MiB body
// and stall. The edge holds at most its bound (16 MiB) of them; the others
// get 503, and small requests keep being served. Unbounded, the edge held
// all 112 MiB.
func TestBodyMemoryBounded(t *testing.T) {
	const (
		clients = 16
		body    = 8 << 20
		sent    = 7 << 20
	)
	g := newTrustGateway(t, func(c *config.Config) {
		c.MaxBodyBytes = body
		c.BodyMemoryBytes = 16 << 20
		c.BodyGrace = time.Minute // stalled clients are not cut off during the test
		c.MinBodyRate = 1
	})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	chunk := bytes.Repeat([]byte("a"), 1<<20)
	var refused atomic.Int32
	for range clients {
		c := rawRequest(t, g.sb, fmt.Sprintf("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: %d\r\n\r\n{\"model\":\"%s\",\"input\":\"", body, embedModel))
		go func() {
			for range sent / len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
		go func() {
			resp, b, err := readResponse(t, c)
			if err == nil && resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "server_busy") {
				refused.Add(1)
			}
		}()
	}
	// 12 MiB (three quarters of the bound) hold at most two of them.
	require.Eventually(t, func() bool { return refused.Load() >= clients-2 }, 30*time.Second, 20*time.Millisecond,
		"clients past the bound are refused (%d were)", refused.Load())

	var peak uint64
	for range 3 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapAlloc)
	}
	grown := int64(peak) - int64(before.HeapAlloc)
	t.Logf("live heap grew by %d MiB with %d clients stalled mid-body", grown>>20, clients)
	assert.Less(t, grown, int64(48<<20), "the stalled bodies held stay near the bound")

	// Others keep being served.
	r := g.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "still here"})
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, http.StatusOK, g.sb.Do(t, http.MethodGet, "/v1/models", nil).Status)
	assert.Equal(t, 1, g.upstreamCalls(), "no stalled body reached an upstream")
}

// TestUpstreamClientErrorKeepsConnection: an upstream 400 caused by the
// request (its message quoting the request's words "quota" and "rate
// limit") goes back to the client and does not cool the shared
// connection: the next request is served by it.
func TestUpstreamClientErrorKeepsConnection(t *testing.T) {
	g := newTrustGateway(t, nil)
	g.primary.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.OpenAIError(400, "invalid_request_error", "invalid_value",
		"Invalid value for 'messages[0].name': 'you exceeded your current quota rate limit'"))
	chat := map[string]any{"model": chatModel, "messages": []map[string]any{{"role": "user", "content": "hi"}}}
	r := g.sb.Do(t, http.MethodPost, pathChat, chat)
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	assert.Zero(t, len(g.fallback.Requests()), "a client error is not failed over")

	r = g.sb.Do(t, http.MethodPost, pathChat, chat)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, 2, len(g.primary.Requests()), "the primary connection was not cooled")
	assert.Zero(t, len(g.fallback.Requests()))

	// Malformed input never reaches an upstream.
	before := g.upstreamCalls()
	r = g.sb.Do(t, http.MethodPost, pathChat, "{\"model\":\""+chatModel+"\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}")
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, "invalid_encoding", errorCode(r))
	assert.Equal(t, before, g.upstreamCalls())
}

// A compressed request body is refused with 415, in the route's own shape
// and naming Content-Encoding, on every route that reads a body, where its
// bytes were read as plain JSON (a 400 "not valid UTF-8" that sent the
// client looking at its text); an identity body is served as before.
func TestCompressedBodiesAreRefused(t *testing.T) {
	g := newTrustGateway(t, nil)
	gz := func(v string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, err := zw.Write([]byte(v))
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		return b.String()
	}
	chat := `{"model":"` + chatModel + `","messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct{ path, body string }{
		{pathChat, chat},
		{pathEmbed, `{"model":"` + embedModel + `","input":"hi"}`},
		{"/v1/responses", `{"model":"` + chatModel + `","input":"hi"}`},
		{"/v1/messages", `{"model":"` + chatModel + `","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages/count_tokens", `{"model":"` + chatModel + `","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/audio/speech", `{"model":"openai/tts-1","input":"hi","voice":"alloy"}`},
	} {
		t.Run(c.path, func(t *testing.T) {
			r := g.sb.Do(t, http.MethodPost, c.path, gz(c.body), "Authorization", "Bearer "+g.key, "Content-Encoding", "gzip")
			assert.Equal(t, http.StatusUnsupportedMediaType, r.Status, "%s", r.Body)
			assert.Equal(t, "invalid_request_error", errorType(r), "%s", r.Body)
			assert.Contains(t, r.JSON["error"].(map[string]any)["message"], "Content-Encoding")
			if strings.HasPrefix(c.path, "/v1/messages") {
				assert.Equal(t, "error", r.JSON["type"], "Anthropic's shape")
			} else {
				assert.Equal(t, "unsupported_content_encoding", errorCode(r))
			}
		})
	}
	r := g.sb.Admin(t, http.MethodPost, "/api/keys", gz(`{"name":"zipped"}`), "Content-Encoding", "gzip")
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status, "%s", r.Body)
	assert.Equal(t, "unsupported_content_encoding", errorCode(r))
	assert.Zero(t, g.upstreamCalls(), "no compressed body reached an upstream")

	r = g.sb.Do(t, http.MethodPost, pathChat, chat, "Authorization", "Bearer "+g.key, "Content-Encoding", "identity")
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

// A page that rebinds its own host name to the gateway's address reads the
// gateway as same-origin: its GETs carry no Origin. Keyless, such a request
// (a browser marks it Sec-Fetch-Site) is refused unless its Host names the
// gateway on purpose; the console's own pages at localhost, keyed requests
// and clients that are not browsers are served as before.
func TestRebindingPagesReadNothing(t *testing.T) {
	g := newTrustGateway(t, nil)
	get := func(host string, headers ...string) nodetest.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, g.sb.BaseURL+"/v1/models", nil)
		require.NoError(t, err)
		req.Host = host
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return nodetest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(g.sb.BaseURL, "http://"))
	require.NoError(t, err)
	rebound := "rebind.attacker.example:" + port

	r := get(rebound, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors")
	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "host_not_allowed")
	assert.NotContains(t, string(r.Body), "gpt-4o-mini", "no model list")

	for name, tc := range map[string]struct {
		host    string
		headers []string
	}{
		"the console's page at localhost":    {"localhost:" + port, []string{"Sec-Fetch-Site", "same-origin"}},
		"a page at the loopback address":     {"127.0.0.1:" + port, []string{"Sec-Fetch-Site", "same-origin"}},
		"a keyed page at the rebound name":   {rebound, []string{"Sec-Fetch-Site", "same-origin", "Authorization", "Bearer " + g.key}},
		"the user's own navigation":          {rebound, []string{"Sec-Fetch-Site", "none"}},
		"a client that is not a browser":     {rebound, nil},
		"the allowed origin's host, keyless": {"app.example", []string{"Sec-Fetch-Site", "same-origin"}},
	} {
		r := get(tc.host, tc.headers...)
		assert.Equal(t, http.StatusOK, r.Status, "%s: %s", name, r.Body)
	}
}
