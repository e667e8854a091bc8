package tokenrefresh

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
)

// Token values distinctive enough that a leak into an error or a log line
// is caught.
const (
	oldAccess  = "at-old-5f1c9e"
	oldRefresh = "rt-one-8b2d7a"
	newAccess  = "at-new-3e6f0b"
	newRefresh = "rt-two-c41a95"
	adminToken = "admin-token-for-tests"
	machineID  = "0123456789abcdef"
	connID     = "conn-1"
)

var testSecrets = []string{oldAccess, oldRefresh, newAccess, newRefresh, adminToken}

// fakeAdmin is core's admin API for one connection, with StoreTokens'
// compare-and-swap on the generation.
type fakeAdmin struct {
	mu        sync.Mutex
	creds     *corev1.GetConnectionCredentialsResponse
	credsErr  error
	storeErrs []error // returned by the next StoreTokens calls, in order
	storeDown error   // returned by every StoreTokens call while set
	stored    []*corev1.StoreTokensRequest
	calls     int // StoreTokens calls, failed ones included
	md        []metadata.MD
}

var _ Admin = (*fakeAdmin)(nil)

func newFakeAdmin(tokenURL string, gen uint64) *fakeAdmin {
	return &fakeAdmin{creds: &corev1.GetConnectionCredentialsResponse{
		Connection: &corev1.Connection{
			Id: connID, MachineId: machineID, Provider: "openai-compatible-oauth", AuthType: "oauth",
			ProviderSpecificData: &corev1.ProviderSpecificData{},
		},
		AccessToken:  oldAccess,
		RefreshToken: oldRefresh,
		TokenUrl:     tokenURL,
		ClientId:     "cid",
		Generation:   gen,
	}}
}

func (f *fakeAdmin) GetConnectionCredentials(ctx context.Context, in *corev1.GetConnectionCredentialsRequest, _ ...grpc.CallOption) (*corev1.GetConnectionCredentialsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	md, _ := metadata.FromOutgoingContext(ctx)
	f.md = append(f.md, md)
	if f.credsErr != nil {
		return nil, f.credsErr
	}
	if in.GetConnectionId() != connID {
		return nil, status.Error(codes.NotFound, "no such connection")
	}
	return f.creds, nil
}

func (f *fakeAdmin) StoreTokens(ctx context.Context, in *corev1.StoreTokensRequest, _ ...grpc.CallOption) (*corev1.StoreTokensResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	md, _ := metadata.FromOutgoingContext(ctx)
	f.md = append(f.md, md)
	if f.storeDown != nil {
		return nil, f.storeDown
	}
	if len(f.storeErrs) > 0 {
		err := f.storeErrs[0]
		f.storeErrs = f.storeErrs[1:]
		return nil, err
	}
	f.stored = append(f.stored, in)
	if in.GetGeneration() != f.creds.GetGeneration() {
		return &corev1.StoreTokensResponse{Generation: f.creds.GetGeneration()}, nil
	}
	if in.GetError() == "" && !in.GetNeedsRelogin() {
		f.creds.Generation++
	}
	return &corev1.StoreTokensResponse{Generation: f.creds.GetGeneration(), Stored: true}, nil
}

func (f *fakeAdmin) setStoreDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.storeDown = err
}

func (f *fakeAdmin) storedRequests() []*corev1.StoreTokensRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*corev1.StoreTokensRequest(nil), f.stored...)
}

// tokenServer is a fake OAuth token endpoint answering every request with
// status and body, recording the forms it received.
type tokenServer struct {
	*httptest.Server
	mu    sync.Mutex
	hook  func() // called before answering
	forms []url.Values
	ctype []string
}

func (ts *tokenServer) setHook(fn func()) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.hook = fn
}

func newTokenServer(t *testing.T, status int, body string) *tokenServer {
	ts := &tokenServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/token" {
			http.NotFound(w, r)
			return
		}
		_ = r.ParseForm()
		ts.mu.Lock()
		ts.forms = append(ts.forms, r.PostForm)
		ts.ctype = append(ts.ctype, r.Header.Get("Content-Type"))
		hook := ts.hook
		ts.mu.Unlock()
		if hook != nil {
			hook()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) received() []url.Values {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]url.Values(nil), ts.forms...)
}

// newRefresher returns a refresher on admin whose logs go to the returned
// buffer.
func newRefresher(admin Admin) (*Refresher, *syncBuffer) {
	var logs syncBuffer
	r := New(admin, adminToken, NewClients(), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	r.storeBackoff = time.Millisecond
	return r, &logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func job(gen uint64) *busv1.TokenRefreshJob {
	return &busv1.TokenRefreshJob{MachineId: machineID, ConnectionId: connID, Generation: gen}
}

func assertNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range testSecrets {
		assert.NotContains(t, text, s, "%s leaks a secret", what)
	}
}

func TestTokenRefreshHandle(t *testing.T) {
	type want struct {
		err        bool   // Handle returns an error: the job is retried
		stored     bool   // one StoreTokens call
		access     string // stored access token
		refresh    string // stored refresh token ("" keeps the old one)
		expiresIn  time.Duration
		relogin    bool
		errorText  string // substring of the stored error
		generation uint64 // generation after the job
	}
	cases := []struct {
		name   string
		status int
		body   string
		want   want
	}{
		{
			name: "success with rotation", status: 200,
			body: `{"access_token":"` + newAccess + `","refresh_token":"` + newRefresh + `","expires_in":3600,"token_type":"Bearer"}`,
			want: want{stored: true, access: newAccess, refresh: newRefresh, expiresIn: time.Hour, generation: 4},
		},
		{
			name: "success without a new refresh token", status: 200,
			body: `{"access_token":"` + newAccess + `","expires_in":"120","token_type":"bearer"}`,
			want: want{stored: true, access: newAccess, expiresIn: 2 * time.Minute, generation: 4},
		},
		{
			name: "success without a lifetime", status: 200,
			body: `{"access_token":"` + newAccess + `"}`,
			want: want{stored: true, access: newAccess, generation: 4},
		},
		{
			name: "invalid_grant needs a new login", status: 400,
			body: `{"error":"invalid_grant","error_description":"token ` + oldRefresh + ` was revoked"}`,
			want: want{stored: true, relogin: true, errorText: "invalid_grant", generation: 3},
		},
		{
			name: "refresh_token_reused as an error object", status: 401,
			body: `{"error":{"message":"already used","type":"invalid_request_error","code":"refresh_token_reused"}}`,
			want: want{stored: true, relogin: true, errorText: "refresh_token_reused", generation: 3},
		},
		{
			name: "invalid_grant in a 200", status: 200,
			body: `{"error":"invalid_grant"}`,
			want: want{stored: true, relogin: true, errorText: "invalid_grant", generation: 3},
		},
		{
			name: "invalid_client is recorded, not retried", status: 401,
			body: `{"error":"invalid_client"}`,
			want: want{stored: true, errorText: "invalid_client", generation: 3},
		},
		{
			name: "server error is retried", status: 503,
			body: `{"error":"temporarily_unavailable"}`,
			want: want{err: true, generation: 3},
		},
		{
			name: "invalid_grant in a 500 is retried", status: 500,
			body: `{"error":"invalid_grant"}`,
			want: want{err: true, generation: 3},
		},
		{
			name: "rate limit is retried", status: 429,
			body: `{"error":"slow_down"}`,
			want: want{err: true, generation: 3},
		},
		{
			// A hostile or broken endpoint echoing the refresh token as its
			// error code: the code reads like one (letters, digits, '-').
			name: "refresh token echoed as the code of a refusal", status: 400,
			body: `{"error":"` + oldRefresh + `"}`,
			want: want{stored: true, errorText: "[hidden]", generation: 3},
		},
		{
			name: "refresh token echoed as the code of a retried error", status: 503,
			body: `{"error":"` + oldRefresh + `"}`,
			want: want{err: true, generation: 3},
		},
		{
			name: "garbled success is retried", status: 200,
			body: `<html>captive portal</html>`,
			want: want{err: true, generation: 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTokenServer(t, tc.status, tc.body)
			admin := newFakeAdmin(ts.URL+"/token", 3)
			r, logs := newRefresher(admin)

			before := time.Now()
			err := r.Handle(context.Background(), job(3))
			if tc.want.err {
				require.Error(t, err)
				assertNoSecrets(t, "the job error", err.Error())
			} else {
				require.NoError(t, err)
			}

			// Exactly one standard refresh-token grant.
			forms := ts.received()
			require.Len(t, forms, 1)
			assert.Equal(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {oldRefresh}, "client_id": {"cid"}}, forms[0])
			assert.Equal(t, "application/x-www-form-urlencoded", ts.ctype[0])

			stored := admin.storedRequests()
			if !tc.want.stored {
				assert.Empty(t, stored)
			} else {
				require.Len(t, stored, 1)
				s := stored[0]
				assert.Equal(t, connID, s.GetConnectionId())
				assert.Equal(t, uint64(3), s.GetGeneration(), "compare-and-swap on the generation the refresh started from")
				assert.Equal(t, tc.want.access, s.GetAccessToken())
				assert.Equal(t, tc.want.refresh, s.GetRefreshToken())
				assert.Equal(t, tc.want.relogin, s.GetNeedsRelogin())
				if tc.want.errorText != "" {
					assert.Contains(t, s.GetError(), tc.want.errorText)
				} else {
					assert.Empty(t, s.GetError())
				}
				assertNoSecrets(t, "the stored error", s.GetError())
				if tc.want.expiresIn > 0 {
					require.NotNil(t, s.GetExpiresAt())
					at := s.GetExpiresAt().AsTime()
					assert.WithinRange(t, at, before.Add(tc.want.expiresIn).Add(-time.Second), time.Now().Add(tc.want.expiresIn))
				} else {
					assert.Nil(t, s.GetExpiresAt())
				}
			}
			assert.Equal(t, tc.want.generation, admin.creds.GetGeneration())

			// Every call to core carried the admin token and the machine.
			for _, md := range admin.md {
				assert.Equal(t, []string{"Bearer " + adminToken}, md.Get("authorization"))
				assert.Equal(t, []string{machineID}, md.Get("x-switchboard-machine"))
			}
			assertNoSecrets(t, "the log", logs.String())
		})
	}
}

func TestTokenRefreshNothingToDo(t *testing.T) {
	cases := []struct {
		name  string
		setup func(*fakeAdmin)
		job   *busv1.TokenRefreshJob
	}{
		{"stale generation", func(*fakeAdmin) {}, job(2)},
		{"connection gone", func(*fakeAdmin) {}, &busv1.TokenRefreshJob{MachineId: machineID, ConnectionId: "other", Generation: 3}},
		{"not an OAuth connection", func(f *fakeAdmin) { f.creds.Connection.AuthType = "apikey" }, job(3)},
		{"already needs a new login", func(f *fakeAdmin) { f.creds.Connection.NeedsRelogin = true }, job(3)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTokenServer(t, 200, `{"access_token":"x"}`)
			admin := newFakeAdmin(ts.URL+"/token", 3)
			tc.setup(admin)
			r, _ := newRefresher(admin)
			require.NoError(t, r.Handle(context.Background(), tc.job))
			assert.Empty(t, ts.received(), "no call to the token endpoint")
			assert.Empty(t, admin.storedRequests())
		})
	}
}

func TestTokenRefreshWithoutMaterialNeedsRelogin(t *testing.T) {
	ts := newTokenServer(t, 200, `{"access_token":"x"}`)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	admin.creds.RefreshToken = ""
	r, _ := newRefresher(admin)
	require.NoError(t, r.Handle(context.Background(), job(3)))
	assert.Empty(t, ts.received())
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.True(t, stored[0].GetNeedsRelogin())
	assert.Contains(t, stored[0].GetError(), "no refresh token")
}

func TestTokenRefreshRetriesWhenCoreIsDown(t *testing.T) {
	t.Run("credentials unavailable", func(t *testing.T) {
		admin := newFakeAdmin("http://127.0.0.1:1/token", 3)
		admin.credsErr = status.Error(codes.Unavailable, "core is restarting")
		r, _ := newRefresher(admin)
		assert.Error(t, r.Handle(context.Background(), job(3)))
	})
	t.Run("store retried within the job", func(t *testing.T) {
		ts := newTokenServer(t, 200, `{"access_token":"`+newAccess+`","refresh_token":"`+newRefresh+`"}`)
		admin := newFakeAdmin(ts.URL+"/token", 3)
		admin.storeErrs = []error{status.Error(codes.Unavailable, "blip"), status.Error(codes.Unavailable, "blip")}
		r, _ := newRefresher(admin)
		require.NoError(t, r.Handle(context.Background(), job(3)))
		assert.Len(t, ts.received(), 1, "the rotated tokens are not lost to a blip")
		assert.Equal(t, 3, admin.calls)
		assert.Equal(t, uint64(4), admin.creds.GetGeneration())
	})
	t.Run("store refused", func(t *testing.T) {
		ts := newTokenServer(t, 200, `{"access_token":"`+newAccess+`"}`)
		admin := newFakeAdmin(ts.URL+"/token", 3)
		admin.storeErrs = []error{status.Error(codes.PermissionDenied, "bad admin token")}
		r, _ := newRefresher(admin)
		err := r.Handle(context.Background(), job(3))
		require.Error(t, err)
		assert.Equal(t, 1, admin.calls, "no retry of a refusal")
		assertNoSecrets(t, "the job error", err.Error())
	})
}

func TestTokenRefreshLostRace(t *testing.T) {
	ts := newTokenServer(t, 200, `{"access_token":"`+newAccess+`"}`)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	// Another refresh lands while this one talks to the endpoint.
	ts.setHook(func() {
		admin.mu.Lock()
		admin.creds.Generation = 4
		admin.mu.Unlock()
	})
	r, logs := newRefresher(admin)
	require.NoError(t, r.Handle(context.Background(), job(3)))
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.Equal(t, uint64(3), stored[0].GetGeneration())
	assert.Equal(t, uint64(4), admin.creds.GetGeneration(), "the newer refresh is kept")
	assert.Contains(t, logs.String(), "another refresh won")
}

// Two jobs of one connection at once (a copy enqueued after the
// de-duplication window, a redelivery): the refresh token is presented
// once, and both jobs share its outcome. Presented twice, a provider that
// detects reuse revokes the whole login.
func TestTokenRefreshOneAtATimePerConnection(t *testing.T) {
	ts := newTokenServer(t, 200, `{"access_token":"`+newAccess+`","refresh_token":"rt-rotated"}`)
	ts.setHook(func() { time.Sleep(100 * time.Millisecond) })
	admin := newFakeAdmin(ts.URL+"/token", 3)
	r, _ := newRefresher(admin)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Handle(context.Background(), job(3))
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Len(t, ts.received(), 1, "the refresh token was presented once")
	assert.Len(t, admin.storedRequests(), 1)
	assert.Equal(t, uint64(4), admin.creds.GetGeneration())
}

func TestTokenRefreshEndpointUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	admin := newFakeAdmin("http://"+addr+"/token", 3)
	r, logs := newRefresher(admin)
	err = r.Handle(context.Background(), job(3))
	require.Error(t, err, "a network error is retried")
	assert.Contains(t, err.Error(), "unreachable")
	assert.Empty(t, admin.storedRequests())
	assertNoSecrets(t, "the job error", err.Error())
	assertNoSecrets(t, "the log", logs.String())
}

func TestTokenRefreshRefusesRedirects(t *testing.T) {
	var followed atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Store(true) }))
	t.Cleanup(elsewhere.Close)
	ts := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/steal", http.StatusTemporaryRedirect))
	t.Cleanup(ts.Close)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	r, _ := newRefresher(admin)
	require.NoError(t, r.Handle(context.Background(), job(3)))
	assert.False(t, followed.Load(), "the refresh token is not sent to a redirect target")
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.Contains(t, stored[0].GetError(), "307")
	assert.False(t, stored[0].GetNeedsRelogin())
}

func TestTokenRefreshHonoursProxy(t *testing.T) {
	ts := newTokenServer(t, 200, `{"access_token":"`+newAccess+`"}`)
	tokenURL := ts.URL + "/token"

	t.Run("http", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		fwd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A forward proxy for plain http: the request line holds the
			// absolute URL; pass the request on and relay the answer.
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.String()+" auth="+r.Header.Get("Proxy-Authorization"))
			mu.Unlock()
			out := r.Clone(r.Context())
			out.RequestURI = ""
			out.Header.Del("Proxy-Authorization")
			resp, err := http.DefaultTransport.RoundTrip(out)
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
		t.Cleanup(fwd.Close)
		proxyURL := strings.Replace(fwd.URL, "http://", "http://user:pw@", 1)

		admin := newFakeAdmin(tokenURL, 3)
		admin.creds.ProxyUrl = proxyURL
		r, _ := newRefresher(admin)
		require.NoError(t, r.Handle(context.Background(), job(3)))

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, seen, 1)
		assert.Equal(t, "POST "+tokenURL+" auth=Basic dXNlcjpwdw==", seen[0])
		require.Len(t, admin.storedRequests(), 1)
		assert.Equal(t, newAccess, admin.storedRequests()[0].GetAccessToken())
	})

	t.Run("socks5", func(t *testing.T) {
		targets := startSOCKS5(t)
		admin := newFakeAdmin(tokenURL, 3)
		admin.creds.ProxyUrl = "socks5://" + targets.addr
		r, _ := newRefresher(admin)
		require.NoError(t, r.Handle(context.Background(), job(3)))
		assert.Equal(t, []string{strings.TrimPrefix(ts.URL, "http://")}, targets.list())
		require.Len(t, admin.storedRequests(), 1)
		assert.Equal(t, newAccess, admin.storedRequests()[0].GetAccessToken())
	})

	t.Run("unsupported scheme is recorded", func(t *testing.T) {
		admin := newFakeAdmin(tokenURL, 3)
		admin.creds.ProxyUrl = "ftp://user:pw@proxy.example:21"
		r, _ := newRefresher(admin)
		require.NoError(t, r.Handle(context.Background(), job(3)))
		stored := admin.storedRequests()
		require.Len(t, stored, 1)
		assert.Contains(t, stored[0].GetError(), "unsupported proxy scheme")
		assert.NotContains(t, stored[0].GetError(), "pw")
		assert.False(t, stored[0].GetNeedsRelogin())
	})
}

// socks5 is a minimal SOCKS5 proxy (no authentication, CONNECT only) that
// records the addresses it connects to.
type socks5 struct {
	addr    string
	mu      sync.Mutex
	targets []string
	conns   []net.Conn
}

func (s *socks5) track(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
}

func (s *socks5) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

func startSOCKS5(t *testing.T) *socks5 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &socks5{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c)
			}()
		}
	}()
	return s
}

func (s *socks5) serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 262)
	// Greeting: version, method count, methods; choose "no authentication".
	if _, err := io.ReadFull(c, buf[:2]); err != nil || buf[0] != 5 {
		return
	}
	if _, err := io.ReadFull(c, buf[:buf[1]]); err != nil {
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return
	}
	// Request: version, CONNECT, reserved, address type, address, port.
	if _, err := io.ReadFull(c, buf[:4]); err != nil || buf[1] != 1 {
		return
	}
	var host string
	switch buf[3] {
	case 1:
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			return
		}
		host = net.IP(buf[:4]).String()
	case 3:
		if _, err := io.ReadFull(c, buf[:1]); err != nil {
			return
		}
		n := int(buf[0])
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		host = string(buf[:n])
	default:
		return
	}
	if _, err := io.ReadFull(c, buf[:2]); err != nil {
		return
	}
	target := net.JoinHostPort(host, strconv.Itoa(int(buf[0])<<8|int(buf[1])))
	s.mu.Lock()
	s.targets = append(s.targets, target)
	s.mu.Unlock()
	up, err := net.Dial("tcp", target)
	if up != nil {
		s.track(up)
	}
	if err != nil {
		_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	if _, err := c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

// gatedLeases are leases of one process whose first release waits for
// gate: the slow give-back of a lease after a refresh's tokens were stored.
// A lease is refused while held, as KVLeases refuse it.
type gatedLeases struct {
	mu    sync.Mutex
	held  bool
	gated bool
	gate  chan struct{}
}

func (l *gatedLeases) Acquire(_ context.Context, _, _ string, _ time.Duration) (func(context.Context), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return nil, ErrLeaseHeld
	}
	l.held = true
	wait := !l.gated
	l.gated = true
	return func(context.Context) {
		if wait {
			<-l.gate
		}
		l.mu.Lock()
		l.held = false
		l.mu.Unlock()
	}, nil
}

// A job of the next token generation (the refreshed token refused in its
// turn) that arrives while the previous generation's refresh is still
// giving its lease back gets a refresh of its own, at once, where it shared
// the finished refresh's outcome and was acknowledged with nothing done.
func TestTokenRefreshNextGenerationWhileTheLastOneEnds(t *testing.T) {
	ts := newTokenServer(t, 200, `{"access_token":"`+newAccess+`","refresh_token":"rt-rotated"}`)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	r, _ := newRefresher(admin)
	leases := &gatedLeases{gate: make(chan struct{})}
	r.WithLeases(leases, "worker-1")

	first := make(chan error, 1)
	go func() { first <- r.Handle(context.Background(), job(3)) }()
	require.Eventually(t, func() bool { return len(admin.storedRequests()) == 1 }, 10*time.Second, time.Millisecond,
		"the first refresh stores its tokens")

	second := make(chan error, 1)
	go func() { second <- r.Handle(context.Background(), job(4)) }()
	time.Sleep(50 * time.Millisecond) // the second job is in before the lease is given back
	close(leases.gate)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	assert.Len(t, ts.received(), 2, "the next generation's token was refreshed too")
	assert.Equal(t, uint64(5), admin.creds.GetGeneration())
}

// A refresh that fails for a reason a retry could mend (the endpoint down,
// a 503) is retried without a word on the connection; on the job's last
// attempt the failure is recorded on it, so the operator sees why its
// token was not refreshed, and the connection stays in use.
func TestTokenRefreshLastAttemptRecordsTheFailure(t *testing.T) {
	ts := newTokenServer(t, 503, `{"error":"temporarily_unavailable"}`)
	admin := newFakeAdmin(ts.URL+"/token", 3)
	r, logs := newRefresher(admin)

	require.Error(t, r.Handle(context.Background(), job(3)), "an attempt before the last is retried")
	assert.Empty(t, admin.storedRequests(), "nothing recorded while attempts remain")

	require.NoError(t, r.Handle(jobs.AsLastAttempt(context.Background()), job(3)))
	stored := admin.storedRequests()
	require.Len(t, stored, 1)
	assert.Equal(t, uint64(3), stored[0].GetGeneration())
	assert.Contains(t, stored[0].GetError(), "503 (temporarily_unavailable)")
	assert.False(t, stored[0].GetNeedsRelogin(), "a server error says nothing of the refresh token")
	assert.Empty(t, stored[0].GetAccessToken())
	assertNoSecrets(t, "the log", logs.String())
}
