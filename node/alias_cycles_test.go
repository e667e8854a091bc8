package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Aliases that lead back to themselves never reach a model: such a write is
// refused with 400 alias_cycle naming the cycle, and the aliases stay as
// they were. A chain that ends in a model is taken.
func TestAliasCyclesAreRefused(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini"}}})
	kept := map[string]string{"fast": "quick", "quick": "openai/gpt-4o-mini"}
	r := sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": kept})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	for _, tc := range []struct {
		name    string
		aliases map[string]string
		message string
	}{
		{"two aliases naming each other", map[string]string{"a": "b", "b": "a"}, "alias cycle: a -> b -> a"},
		{"an alias naming itself", map[string]string{"a": "a"}, "alias cycle: a -> a"},
		{"a cycle of three beside a model", map[string]string{"fast": "openai/gpt-4o-mini", "x": "y", "y": "z", "z": "x"}, "alias cycle: x -> y -> z -> x"},
		{"an alias leading into a cycle", map[string]string{"a": "m", "m": "n", "n": "m"}, "alias cycle: m -> n -> m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{"aliases": tc.aliases})
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			assert.Equal(t, "alias_cycle", adminError(r)["code"])
			assert.Equal(t, "aliases", adminError(r)["param"])
			assert.Equal(t, tc.message, adminError(r)["message"])
		})
	}
	got := sb.Admin(t, http.MethodGet, "/api/models/aliases", nil).JSON["aliases"]
	assert.Equal(t, map[string]any{"fast": "quick", "quick": "openai/gpt-4o-mini"}, got, "the aliases are unchanged")
}
