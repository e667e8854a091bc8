package clitools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

const (
	testToken   = "admin-token-for-tests"
	testGateway = "http://127.0.0.1:20128"
	testMachine = "0123456789abcdef"
	createdKey  = "sk-" + testMachine + "-abc123-deadbeef"
)

// fakeAdmin checks the bearer token as core does, and creates, lists and
// revokes keys of the machine 0123456789abcdef: the first key created is
// createdKey (id abc123).
type fakeAdmin struct {
	mu      sync.Mutex
	created int
	keys    map[string]string // id: name, of the keys not revoked
	revoked []string
	// failDelete makes DeleteAPIKey fail.
	failDelete bool
}

func (f *fakeAdmin) authorized(ctx context.Context) error {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v := md.Get("authorization"); len(v) == 1 && v[0] == "Bearer "+testToken {
		return nil
	}
	return status.Error(codes.Unauthenticated, "admin token required")
}

func (f *fakeAdmin) GetSettings(ctx context.Context, _ *corev1.GetSettingsRequest, _ ...grpc.CallOption) (*corev1.GetSettingsResponse, error) {
	if err := f.authorized(ctx); err != nil {
		return nil, err
	}
	return &corev1.GetSettingsResponse{}, nil
}

func (f *fakeAdmin) CreateAPIKey(ctx context.Context, in *corev1.CreateAPIKeyRequest, _ ...grpc.CallOption) (*corev1.CreateAPIKeyResponse, error) {
	if err := f.authorized(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created++
	id, key := "abc123", createdKey
	if f.created > 1 {
		id = fmt.Sprintf("key%03d", f.created)
		key = "sk-" + testMachine + "-" + id + "-deadbeef"
	}
	if f.keys == nil {
		f.keys = map[string]string{}
	}
	f.keys[id] = in.GetName()
	return &corev1.CreateAPIKeyResponse{Key: key, Id: id, Name: in.GetName(), MachineId: testMachine}, nil
}

func (f *fakeAdmin) ListAPIKeys(ctx context.Context, _ *corev1.ListAPIKeysRequest, _ ...grpc.CallOption) (*corev1.ListAPIKeysResponse, error) {
	if err := f.authorized(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &corev1.ListAPIKeysResponse{}
	for id, name := range f.keys {
		out.Keys = append(out.Keys, &corev1.APIKey{Id: id, Name: name, MachineId: testMachine})
	}
	return out, nil
}

func (f *fakeAdmin) DeleteAPIKey(ctx context.Context, in *corev1.DeleteAPIKeyRequest, _ ...grpc.CallOption) (*corev1.DeleteAPIKeyResponse, error) {
	if err := f.authorized(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDelete {
		return nil, status.Error(codes.Unavailable, "core is unavailable")
	}
	if _, ok := f.keys[in.GetId()]; !ok {
		return nil, status.Error(codes.NotFound, "no API key with id '"+in.GetId()+"'")
	}
	delete(f.keys, in.GetId())
	f.revoked = append(f.revoked, in.GetId())
	return &corev1.DeleteAPIKeyResponse{Id: in.GetId(), Deleted: true}, nil
}

// live reports whether the key id is still valid.
func (f *fakeAdmin) live(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.keys[id]
	return ok
}

func newHandler(t *testing.T) (*ClaudeSettings, *fakeAdmin, string) {
	t.Helper()
	home := t.TempDir()
	admin := &fakeAdmin{}
	return &ClaudeSettings{
		Admin: admin, PublicURL: testGateway + "/", Home: home,
		LookPath: func(string) (string, error) { return "", errors.New("not found") },
	}, admin, filepath.Join(home, ".claude", "settings.json")
}

// serve calls the handler directly as a caller at remoteAddr; no network
// traffic is sent.
func serve(t *testing.T, h http.Handler, method, remoteAddr, body string, auth bool) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, ClaudeSettingsPath, strings.NewReader(body))
	r.RemoteAddr = remoteAddr
	if auth {
		r.Header.Set("Authorization", "Bearer "+testToken)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w, out
}

func TestClaudeSettingsRefusesNonLoopbackCallers(t *testing.T) {
	h, admin, path := newHandler(t)
	for _, addr := range []string{"203.0.113.7:1234", "[2001:db8::1]:443", "10.0.0.2:5555", "garbage"} {
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			t.Run(method+" "+addr, func(t *testing.T) {
				r := httptest.NewRequest(method, ClaudeSettingsPath, strings.NewReader(`{}`))
				r.RemoteAddr = addr
				r.Header.Set("Authorization", "Bearer "+testToken)
				// Forwarding headers do not make a remote caller local.
				r.Header.Set("X-Forwarded-For", "127.0.0.1")
				r.Header.Set("X-Real-Ip", "127.0.0.1")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
				var body struct {
					Error struct {
						Message string `json:"message"`
						Type    string `json:"type"`
						Code    string `json:"code"`
					} `json:"error"`
				}
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
				assert.Equal(t, "permission_error", body.Error.Type)
				assert.Equal(t, "loopback_only", body.Error.Code)
				assert.NotEmpty(t, body.Error.Message)
			})
		}
	}
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "nothing written")
	assert.Zero(t, admin.created, "no key created")
}

func TestClaudeSettingsNeedsAdminToken(t *testing.T) {
	h, admin, path := newHandler(t)
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		w, out := serve(t, h, method, "127.0.0.1:40000", `{}`, false)
		assert.Equal(t, http.StatusUnauthorized, w.Code, method)
		assert.Equal(t, "authentication_error", out["error"].(map[string]any)["type"])
	}
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Zero(t, admin.created)
	w, _ := serve(t, h, http.MethodPut, "127.0.0.1:40000", `{}`, true)
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
}

const original = `{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "permissions": {"allow": ["Bash(npm run test:*)"], "deny": []},
  "env": {
    "DISABLE_TELEMETRY": "1",
    "ANTHROPIC_BASE_URL": "https://elsewhere.example"
  },
  "cleanupPeriodDays": 20.0,
  "model": "opus",
  "unknownFutureKey": {"nested": [1, 2.50, {"x": null}], "big": 12345678901234567890}
}
`

func TestClaudeSettingsRoundTripKeepsUnrelatedKeys(t *testing.T) {
	h, admin, path := newHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(original), 0o644))

	// GET: installed? pointed here?
	w, st := serve(t, h, http.MethodGet, "127.0.0.1:50000", "", true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, false, st["installed"])
	assert.Equal(t, true, st["settingsExists"])
	assert.Equal(t, false, st["configured"], "points elsewhere")
	assert.Equal(t, "https://elsewhere.example", st["baseUrl"])
	assert.Equal(t, testGateway, st["gatewayUrl"])

	// POST without a key creates one and writes the env keys.
	w, st = serve(t, h, http.MethodPost, "[::1]:50000", `{"model":"cc/claude-sonnet-4-6","haikuModel":"cc/claude-haiku-4-5"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, true, st["configured"])
	assert.Equal(t, true, st["hasAuthToken"])
	assert.Equal(t, true, st["keyCreated"])
	assert.Equal(t, "abc123", st["keyId"])
	assert.NotContains(t, w.Body.String(), createdKey, "the key is not echoed")
	assert.Equal(t, 1, admin.created)
	assert.Equal(t, map[string]any{"ANTHROPIC_MODEL": "cc/claude-sonnet-4-6", "ANTHROPIC_DEFAULT_HAIKU_MODEL": "cc/claude-haiku-4-5"}, st["models"])

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(data)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	envs := got["env"].(map[string]any)
	assert.Equal(t, map[string]any{
		"DISABLE_TELEMETRY":             "1",
		"ANTHROPIC_BASE_URL":            testGateway,
		"ANTHROPIC_AUTH_TOKEN":          createdKey,
		"ANTHROPIC_MODEL":               "cc/claude-sonnet-4-6",
		"ANTHROPIC_DEFAULT_HAIKU_MODEL": "cc/claude-haiku-4-5",
		"SWITCHBOARD_KEY_ID":            "abc123",
	}, envs)
	// Other values keep their exact JSON, and keys their order.
	assert.Contains(t, text, `"cleanupPeriodDays": 20.0`)
	assert.Contains(t, text, `2.50`)
	assert.Contains(t, text, `12345678901234567890`)
	assert.Contains(t, text, `"Bash(npm run test:*)"`)
	assert.Less(t, strings.Index(text, `"$schema"`), strings.Index(text, `"permissions"`))
	assert.Less(t, strings.Index(text, `"env"`), strings.Index(text, `"cleanupPeriodDays"`))
	assert.Less(t, strings.Index(text, `"DISABLE_TELEMETRY"`), strings.Index(text, `"ANTHROPIC_BASE_URL"`))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left behind")

	// POST with a key uses it and creates none; the key the route created
	// before, in no file now, is revoked.
	w, _ = serve(t, h, http.MethodPost, "127.0.0.1:50000", `{"apiKey":"sk-given-key"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, 1, admin.created)
	data, _ = os.ReadFile(path)
	assert.Contains(t, string(data), `"ANTHROPIC_AUTH_TOKEN": "sk-given-key"`)
	assert.NotContains(t, string(data), "SWITCHBOARD_KEY_ID", "the caller's key is not the route's")
	assert.NotContains(t, w.Body.String(), "sk-given-key")
	assert.Equal(t, []string{"abc123"}, admin.revoked)

	// DELETE removes the gateway's keys and nothing else.
	w, st = serve(t, h, http.MethodDelete, "127.0.0.1:50000", "", true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, false, st["configured"])
	assert.Equal(t, false, st["hasAuthToken"])
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	got = nil
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, map[string]any{"DISABLE_TELEMETRY": "1"}, got["env"])
	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(original), &want))
	delete(want, "env")
	delete(got, "env")
	assert.Equal(t, want, got, "unrelated keys kept")
	assert.Contains(t, string(data), `"cleanupPeriodDays": 20.0`)
}

func TestClaudeSettingsWithoutAFile(t *testing.T) {
	h, _, path := newHandler(t)
	h.LookPath = func(name string) (string, error) { return "/usr/local/bin/" + name, nil }

	w, st := serve(t, h, http.MethodGet, "127.0.0.1:1", "", true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, true, st["installed"])
	assert.Equal(t, "/usr/local/bin/claude", st["cliPath"])
	assert.Equal(t, false, st["settingsExists"])

	// DELETE with nothing to delete writes nothing.
	w, _ = serve(t, h, http.MethodDelete, "127.0.0.1:1", "", true)
	require.Equal(t, http.StatusOK, w.Code)
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	w, st = serve(t, h, http.MethodPost, "127.0.0.1:1", "", true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, true, st["configured"])
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, map[string]any{"env": map[string]any{"ANTHROPIC_BASE_URL": testGateway, "ANTHROPIC_AUTH_TOKEN": createdKey, "SWITCHBOARD_KEY_ID": "abc123"}}, got)

	// DELETE of the only keys drops the empty env.
	w, _ = serve(t, h, http.MethodDelete, "127.0.0.1:1", "", true)
	require.Equal(t, http.StatusOK, w.Code)
	data, _ = os.ReadFile(path)
	assert.JSONEq(t, `{}`, string(data))
}

func TestClaudeSettingsLeavesABrokenFileAlone(t *testing.T) {
	h, admin, path := newHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	broken := []byte(`{"env": {"A": "1"}, // a comment` + "\n")
	require.NoError(t, os.WriteFile(path, broken, 0o600))
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		w, out := serve(t, h, method, "127.0.0.1:1", "", true)
		assert.Equal(t, http.StatusConflict, w.Code, method)
		assert.Equal(t, "invalid_settings_file", out["error"].(map[string]any)["code"])
	}
	data, _ := os.ReadFile(path)
	assert.Equal(t, broken, data)
	assert.Zero(t, admin.created)

	require.NoError(t, os.WriteFile(path, []byte(`{"env": ["not", "an", "object"]}`), 0o600))
	w, _ := serve(t, h, http.MethodPost, "127.0.0.1:1", "", true)
	assert.Equal(t, http.StatusConflict, w.Code)
}

func TestParseObjectRejectsNonObjects(t *testing.T) {
	for _, in := range []string{`[]`, `"x"`, `{"a":1} {}`, `{"a":}`, `{`, `null`} {
		_, err := parseObject([]byte(in))
		assert.ErrorIs(t, err, errNotObject, in)
	}
	o, err := parseObject([]byte("  \n"))
	require.NoError(t, err)
	assert.Empty(t, o)
}

// FuzzParseObject: whatever parses, marshals to JSON that parses to the
// same keys and values.
func FuzzParseObject(f *testing.F) {
	f.Add([]byte(original))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := parseObject(data)
		if err != nil {
			return
		}
		out, err := o.marshal()
		require.NoError(t, err)
		var a, b map[string]any
		require.NoError(t, json.Unmarshal(out, &b))
		if json.Unmarshal(data, &a) == nil && len(a) > 0 {
			assert.Equal(t, a, b)
		}
	})
}
