package node_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// adminError is the error object of an admin answer.
func adminError(r nodetest.Response) map[string]any {
	e, _ := r.JSON["error"].(map[string]any)
	return e
}

// Admin writes past the documented bounds (megabytes of aliases, disabled
// models or names, all within the body limit) answer 400 invalid_value
// naming the parameter, not 503 "try again", and store nothing.
func TestAdminWritesPastTheirBoundsAreRefused(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	aliases := map[string]string{}
	for i := range 8000 {
		aliases["a"+strconv.Itoa(i)+strings.Repeat("x", 150)] = "openai/gpt-4o-mini"
	}
	ids := make([]string, 0, 20000)
	for i := range 20000 {
		ids = append(ids, "m"+strconv.Itoa(i)+strings.Repeat("y", 100))
	}
	combos := make([]map[string]any, 0, 51)
	for i := range 51 {
		combos = append(combos, map[string]any{"name": "c" + strconv.Itoa(i), "models": []string{"openai/gpt-4o-mini"}})
	}
	longCombo := make([]string, 21)
	for i := range longCombo {
		longCombo[i] = "openai/m" + strconv.Itoa(i)
	}
	enabled := make([]string, 1001)
	for i := range enabled {
		enabled[i] = "m" + strconv.Itoa(i)
	}
	huge := strings.Repeat("n", 3<<20)
	for _, tc := range []struct {
		name, method, path string
		body               any
		param              string
	}{
		{"8,000 aliases", http.MethodPut, "/api/models/aliases", map[string]any{"aliases": aliases}, "aliases"},
		{"51 combos", http.MethodPut, "/api/models/combos", map[string]any{"combos": combos}, "combos"},
		{"a combo of 21 models", http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{{"name": "long", "models": longCombo}}}, "combos"},
		{"20,000 disabled ids", http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": "openai", "ids": ids}, "ids"},
		{"a disabled id of 201 characters", http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": "openai", "ids": []string{strings.Repeat("i", 201)}}, "ids"},
		{"a provider alias of 3 MB", http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": huge, "ids": []string{"m"}}, "providerAlias"},
		{"a connection name of 3 MB", http.MethodPost, "/api/providers", map[string]any{"provider": "openai", "name": huge, "apiKey": "k"}, "name"},
		{"a connection name of 201 characters", http.MethodPost, "/api/providers", map[string]any{"provider": "openai", "name": strings.Repeat("é", 201), "apiKey": "k"}, "name"},
		{"1,001 enabled models", http.MethodPost, "/api/providers", map[string]any{"provider": "openai", "name": "n", "apiKey": "k",
			"providerSpecificData": map[string]any{"enabledModels": enabled}}, "providerSpecificData.enabledModels"},
		{"a key name of 3 MB", http.MethodPost, "/api/keys", map[string]any{"name": huge}, "name"},
		{"a machine name of 3 MB", http.MethodPost, "/api/machines", map[string]any{"name": huge}, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sb.Admin(t, tc.method, tc.path, tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%.300s", r.Body)
			assert.Equal(t, "invalid_value", adminError(r)["code"])
			assert.Equal(t, tc.param, adminError(r)["param"])
			assert.Less(t, len(r.Body), 2000, "the answer does not echo the input")
		})
	}
	for path, field := range map[string]string{"/api/models/aliases": "aliases", "/api/models/combos": "combos", "/api/providers": "connections", "/api/keys": "keys"} {
		r := sb.Admin(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", path)
		assert.Empty(t, r.JSON[field], "%s stores nothing", path)
	}
	r := sb.Admin(t, http.MethodGet, "/api/models/disabled", nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Empty(t, r.JSON["disabled"])

	// A connection renamed past the bound is refused too.
	id := sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "n", "apiKey": "k"})
	r = sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"name": huge})
	require.Equal(t, http.StatusBadRequest, r.Status, "%.300s", r.Body)
	assert.Equal(t, "name", adminError(r)["param"])
}

// The bounds count what a machine holds: disabled models added a few at a
// time stop at the bound, and the machine keeps what it had.
func TestDisabledModelsStopAtTheirBoundAcrossWrites(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	batch := func(from int) []string {
		ids := make([]string, 500)
		for i := range ids {
			ids[i] = "m" + strconv.Itoa(from+i)
		}
		return ids
	}
	for _, alias := range []string{"openai", "groq"} {
		r := sb.Admin(t, http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": alias, "ids": batch(0)})
		require.Equal(t, http.StatusOK, r.Status, "%.300s", r.Body)
	}
	// Ids already disabled do not count twice.
	r := sb.Admin(t, http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": "groq", "ids": batch(0)})
	require.Equal(t, http.StatusOK, r.Status, "%.300s", r.Body)

	r = sb.Admin(t, http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": "mistral", "ids": []string{"one-more"}})
	require.Equal(t, http.StatusBadRequest, r.Status, "%.300s", r.Body)
	assert.Equal(t, "invalid_value", adminError(r)["code"])
	assert.Equal(t, "ids", adminError(r)["param"])
	r = sb.Admin(t, http.MethodGet, "/api/models/disabled", nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Len(t, r.JSON["disabled"], 2)

	// Re-enabling makes room again.
	r = sb.Admin(t, http.MethodDelete, "/api/models/disabled?providerAlias=groq&id=m0", nil)
	require.Equal(t, http.StatusOK, r.Status, "%.300s", r.Body)
	r = sb.Admin(t, http.MethodPost, "/api/models/disabled", map[string]any{"providerAlias": "mistral", "ids": []string{"one-more"}})
	assert.Equal(t, http.StatusOK, r.Status, "%.300s", r.Body)
}

// A value larger than the state store takes, through a field no bound
// covers (here a 3 MB API key), answers 413 request_too_large: retrying
// cannot help, so it is not the 503 "try again" of a store outage.
func TestAdminValueLargerThanTheStoreTakesIs413(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	r := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai", "name": "big", "apiKey": strings.Repeat("k", 3<<20)})
	require.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "%.300s", r.Body)
	assert.Equal(t, "request_too_large", adminError(r)["code"])
	assert.Equal(t, "invalid_request_error", adminError(r)["type"])

	// The store is fine: the next write goes through.
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "small", "apiKey": "k"})
}

// An error that quotes what the caller sent (an unknown provider id of
// megabytes) answers a message of a few kilobytes at most, not the input
// back: over gRPC between processes such a message would be a trailer
// larger than a peer takes.
func TestAdminErrorsDoNotEchoMegabytes(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	huge := "no-such-provider-" + strings.Repeat("é", 1<<20)
	r := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": huge, "name": "n", "apiKey": "k"})
	require.Equal(t, http.StatusBadRequest, r.Status)
	assert.Less(t, len(r.Body), 4<<10, "the answer quotes at most a few kilobytes")
	msg, _ := adminError(r)["message"].(string)
	assert.Contains(t, msg, "no-such-provider-", "the message still names what was sent")
	assert.True(t, utf8.ValidString(msg))
}
