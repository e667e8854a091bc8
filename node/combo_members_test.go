package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// A combo's models are aliases or models, never combos: the router would
// not serve a combo named inside another, so naming one, directly or
// through an alias, is refused where it is written, and what was stored
// stays.
func TestComboNamingACombo(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini"}}})
	combos := func(cs ...map[string]any) map[string]any { return map[string]any{"combos": cs} }
	best := map[string]any{"name": "best", "models": []string{"openai/gpt-4o-mini"}}
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos", combos(best)).Status)

	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/aliases",
		map[string]any{"aliases": map[string]string{"top": "best"}}).Status)
	for _, tc := range []struct {
		name, named string
		body        map[string]any
	}{
		{"a combo", `"best"`, combos(best, map[string]any{"name": "outer", "models": []string{"best"}})},
		{"an alias of a combo", `"top"`, combos(best, map[string]any{"name": "outer", "models": []string{"openai/gpt-4o-mini", "top"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sb.Admin(t, http.MethodPut, "/api/models/combos", tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			e := r.JSON["error"].(map[string]any)
			assert.Equal(t, "invalid_value", e["code"])
			assert.Equal(t, "combos", e["param"])
			assert.Contains(t, e["message"], tc.named)
			got := sb.Admin(t, http.MethodGet, "/api/models/combos", nil)
			assert.Len(t, got.JSON["combos"], 1, "the combos stay as they were: %s", got.Body)
		})
	}

	// An alias that would turn a combo's model into a combo is refused too.
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/aliases",
		map[string]any{"aliases": map[string]string{"fast": "openai/gpt-4o-mini"}}).Status)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos",
		combos(best, map[string]any{"name": "outer", "models": []string{"fast"}})).Status)
	r := sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": map[string]string{"fast": "best"}})
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	e := r.JSON["error"].(map[string]any)
	assert.Equal(t, "invalid_value", e["code"])
	assert.Equal(t, "aliases", e["param"])
	assert.Contains(t, e["message"], `"outer"`)
	got := sb.Admin(t, http.MethodGet, "/api/models/aliases", nil)
	assert.Equal(t, "openai/gpt-4o-mini", got.JSON["aliases"].(map[string]any)["fast"])

	r = sb.Do(t, http.MethodGet, "/v1/models/outer", nil)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}
