package node_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

const (
	checkGoodKey = "sk-good-4c1e88a0"
	checkBadKey  = "sk-bad-97f2d3b1"
)

// echoingUpstream refuses every key and quotes it back, as some providers
// do.
func echoingUpstream(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + r.Header.Get("Authorization")[len("Bearer "):] + `.","type":"invalid_request_error","code":"invalid_api_key"}}`))
	}))
	t.Cleanup(s.Close)
	return s.URL + "/v1"
}

func TestValidateProvider(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(checkGoodKey), upstreamtest.WithModels("m1"))
	sb := nodetest.Serve(t, t.TempDir())
	validate := func(body map[string]any) nodetest.Response {
		return sb.Admin(t, http.MethodPost, "/api/providers/validate", body)
	}
	compatible := func(key, base string) map[string]any {
		return map[string]any{"provider": "openai-compatible-check", "apiKey": key,
			"providerSpecificData": map[string]any{"baseUrl": base}}
	}

	t.Run("good key", func(t *testing.T) {
		resp := validate(compatible(checkGoodKey, up.URL()))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		assert.Equal(t, true, resp.JSON["valid"])
		assert.Equal(t, float64(200), resp.JSON["status"])
		assert.GreaterOrEqual(t, resp.JSON["latencyMs"], float64(0))
		assert.NotContains(t, resp.JSON, "error")
		assert.NotContains(t, string(resp.Body), checkGoodKey)
	})
	t.Run("bad key", func(t *testing.T) {
		resp := validate(compatible(checkBadKey, up.URL()))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		assert.Equal(t, false, resp.JSON["valid"])
		assert.Equal(t, float64(401), resp.JSON["status"])
		assert.Contains(t, resp.JSON["error"], "401")
		assert.NotContains(t, string(resp.Body), checkBadKey)
	})
	t.Run("an upstream that echoes the key", func(t *testing.T) {
		resp := validate(compatible(checkBadKey, echoingUpstream(t)))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		assert.Equal(t, false, resp.JSON["valid"])
		assert.Contains(t, resp.JSON["error"], "Incorrect API key provided")
		assert.NotContains(t, string(resp.Body), checkBadKey, "the key is never echoed")
	})
	t.Run("unreachable", func(t *testing.T) {
		resp := validate(compatible(checkGoodKey, nodetest.ClosedURL(t)))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		assert.Equal(t, false, resp.JSON["valid"])
		assert.NotContains(t, resp.JSON, "status", "no upstream status")
		assert.Contains(t, resp.JSON["error"], "unreachable")
		assert.NotContains(t, string(resp.Body), checkGoodKey)
	})
	t.Run("a built-in provider with a base URL override", func(t *testing.T) {
		resp := validate(map[string]any{"provider": "openai", "apiKey": checkGoodKey,
			"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		assert.Equal(t, true, resp.JSON["valid"])
	})
	for name, tc := range map[string]struct {
		body   map[string]any
		status int
		param  string
	}{
		"no provider":                 {map[string]any{"apiKey": "k"}, http.StatusBadRequest, "provider"},
		"unknown provider":            {map[string]any{"provider": "nope", "apiKey": "k"}, http.StatusBadRequest, "provider"},
		"compatible without base URL": {map[string]any{"provider": "openai-compatible-x", "apiKey": "k"}, http.StatusBadRequest, "providerSpecificData.baseUrl"},
		"bad proxy URL": {map[string]any{"provider": "openai", "apiKey": "k",
			"providerSpecificData": map[string]any{"proxyUrl": "ftp://p"}}, http.StatusBadRequest, "providerSpecificData.proxyUrl"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := validate(tc.body)
			require.Equal(t, tc.status, resp.Status, "%s", resp.Body)
			assert.Equal(t, tc.param, resp.JSON["error"].(map[string]any)["param"])
		})
	}
	t.Run("needs the admin token", func(t *testing.T) {
		resp := sb.Do(t, http.MethodPost, "/api/providers/validate", compatible(checkGoodKey, up.URL()))
		assert.Equal(t, http.StatusUnauthorized, resp.Status)
	})

	// Nothing was stored.
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	require.Equal(t, http.StatusOK, list.Status)
	assert.Empty(t, list.JSON["connections"])
}

func TestConnectionTestRecordsResult(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(checkGoodKey), upstreamtest.WithModels("m1"))
	sb := nodetest.Serve(t, t.TempDir())
	id := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-check", "name": "c", "apiKey": checkGoodKey,
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	before := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil).JSON["connection"].(map[string]any)
	assert.Nil(t, before["lastTest"], "never tested")

	resp := sb.Admin(t, http.MethodPost, "/api/providers/"+id+"/test", nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Equal(t, true, resp.JSON["valid"])
	assert.Equal(t, float64(200), resp.JSON["status"])
	assert.NotContains(t, string(resp.Body), checkGoodKey)
	assert.Equal(t, 1, up.Count(upstreamtest.PathModels), "one real call")

	got := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil).JSON["connection"].(map[string]any)
	last, ok := got["lastTest"].(map[string]any)
	require.True(t, ok, "the result is recorded: %v", got)
	assert.Equal(t, true, last["ok"])
	assert.Equal(t, float64(200), last["status"])
	assert.Equal(t, resp.JSON["latencyMs"], last["latencyMs"])
	assert.Equal(t, resp.JSON["testedAt"], last["testedAt"])
	testedAt, err := time.Parse(time.RFC3339Nano, last["testedAt"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), testedAt, time.Minute)
	assert.Equal(t, before["updatedAt"], got["updatedAt"], "a test is not an edit")

	// A key the upstream refuses: the failure replaces the result.
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"apiKey": checkBadKey}).Status)
	resp = sb.Admin(t, http.MethodPost, "/api/providers/"+id+"/test", nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Equal(t, false, resp.JSON["valid"])
	assert.Equal(t, float64(401), resp.JSON["status"])
	got = sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil).JSON["connection"].(map[string]any)
	last = got["lastTest"].(map[string]any)
	assert.Equal(t, false, last["ok"])
	assert.Equal(t, float64(401), last["status"])
	assert.Contains(t, last["error"], "401")
	assert.NotContains(t, string(sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil).Body), checkBadKey)

	// The list shows it too.
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	conns := list.JSON["connections"].([]any)
	require.Len(t, conns, 1)
	assert.Equal(t, false, conns[0].(map[string]any)["lastTest"].(map[string]any)["ok"])

	// An unreachable upstream is recorded with no status.
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPatch, "/api/providers/"+id,
		map[string]any{"providerSpecificData": map[string]any{"baseUrl": nodetest.ClosedURL(t)}}).Status)
	resp = sb.Admin(t, http.MethodPost, "/api/providers/"+id+"/test", nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.NotContains(t, resp.JSON, "status")
	last = sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil).JSON["connection"].(map[string]any)["lastTest"].(map[string]any)
	assert.Equal(t, float64(0), last["status"])
	assert.Contains(t, last["error"], "unreachable")

	missing := sb.Admin(t, http.MethodPost, "/api/providers/00000000-0000-0000-0000-000000000000/test", nil)
	assert.Equal(t, http.StatusNotFound, missing.Status)
	assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodPost, "/api/providers/"+id+"/test", nil).Status)
}

// A key an upstream's refusal echoes near the end of a long message is
// redacted whole before the message is shortened: shortened first, the cut
// left the key's first 30-odd characters in the answer and in the
// connection's stored last test.
func TestValidateRedactsAKeyTheMessageCutsOff(t *testing.T) {
	key := "sk-live-" + strings.Repeat("abcdef0123", 6)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		pre := "The API key you provided was not accepted by this project because it has been revoked or it does not belong to the organization that owns this endpoint; the key was: "
		_, _ = w.Write([]byte(`{"error":{"message":"` + pre + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `"}}`))
	}))
	defer up.Close()
	sb := nodetest.Serve(t, t.TempDir())
	r := sb.Admin(t, http.MethodPost, "/api/providers/validate", map[string]any{"provider": "openai-compatible-check", "apiKey": key,
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})
	assert.Contains(t, string(r.Body), "the key was: [redacted]", "%s", r.Body)
	assert.NotContains(t, string(r.Body), key[:16], "no part of the key")
}
