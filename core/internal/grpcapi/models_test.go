package grpcapi

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchboardhq/switchboard/core/internal/routing"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

func TestAliasCycle(t *testing.T) {
	long := map[string]string{}
	for i := range 30 {
		long["a"+strconv.Itoa(i)] = "a" + strconv.Itoa((i+1)%30)
	}
	for _, tc := range []struct {
		name    string
		aliases map[string]string
		want    []string
	}{
		{"none", nil, nil},
		{"a chain to a model", map[string]string{"a": "b", "b": "c", "c": "openai/gpt-4o-mini", "d": "b"}, nil},
		{"an alias naming itself", map[string]string{"a": "a"}, []string{"a", "a"}},
		{"two", map[string]string{"b": "a", "a": "b"}, []string{"a", "b", "a"}},
		{"a chain into a cycle", map[string]string{"a": "x", "x": "y", "y": "x"}, []string{"x", "y", "x"}},
		{"a long cycle is cut", long, []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "...", "a0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, aliasCycle(tc.aliases))
		})
	}
}

func TestLongAliasChain(t *testing.T) {
	chain := func(n int) map[string]string {
		out := map[string]string{}
		for i := 1; i < n; i++ {
			out["c"+strconv.Itoa(i)] = "c" + strconv.Itoa(i+1)
		}
		out["c"+strconv.Itoa(n)] = "openai/gpt-4o-mini"
		return out
	}
	assert.Nil(t, longAliasChain(chain(routing.MaxAliasDepth)), "as long as the router follows")
	assert.Equal(t, []string{"c1", "c2", "c3", "c4", "c5", "openai/gpt-4o-mini"}, longAliasChain(chain(routing.MaxAliasDepth+1)))
	assert.Nil(t, longAliasChain(nil))
}

// New aliases are refused only for the combos' models they turn into
// combos: a combo stored before combos were checked, naming a combo, does
// not keep the machine's aliases from being written.
func TestNewComboInCombo(t *testing.T) {
	combos := []*busv1.Combo{
		{Name: "best", Models: []string{"openai/gpt-4o-mini"}},
		{Name: "old", Models: []string{"best"}}, // stored before the check
		{Name: "outer", Models: []string{"fast"}},
	}
	before := map[string]string{"fast": "openai/gpt-4o-mini"}
	outer, model, inner := comboInCombo(combos, map[string]string{"fast": "openai/gpt-4o-mini", "quick": "fast"}, before, true)
	assert.Empty(t, outer, "only the stored combo names a combo: %s %s %s", outer, model, inner)
	outer, model, inner = comboInCombo(combos, map[string]string{"fast": "best"}, before, true)
	assert.Equal(t, []string{"outer", "fast", "best"}, []string{outer, model, inner})
}
