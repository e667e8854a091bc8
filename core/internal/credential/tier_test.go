package credential

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A candidate of an earlier tier (the router's: its model list names the
// model) is tried before one of a later tier whatever their priorities, in
// fill-first and in round-robin alike, and the later one still serves when
// the earlier ones cool down. A preferred candidate (a session's, which
// answered the model before) still goes first.
func TestDoTriesEarlierTiersFirst(t *testing.T) {
	// a is first by priority, but its list leaves the model out.
	tiered := func() []Candidate {
		cs := cands("a", "b", "c")
		cs[0].Tier = 2
		return cs
	}
	do := func(h *harness, up *fakeUpstream, strategy, prefer string) string {
		t.Helper()
		res, err := h.eng.Do(context.Background(), Request{MachineID: "m1", Provider: "openai", Model: model,
			Candidates: tiered(), Strategy: strategy, StickyLimit: 1, Prefer: prefer}, up.attempt)
		require.NoError(t, err)
		return res.Candidate.ConnectionID
	}

	h := newHarness()
	up := newUpstream(nil)
	require.Equal(t, "b", do(h, up, StrategyFillFirst, ""))
	require.Equal(t, "b", do(h, up, StrategyFillFirst, ""))
	var got []string
	for range 4 {
		got = append(got, do(h, up, StrategyRoundRobin, ""))
	}
	require.Equal(t, []string{"b", "c", "b", "c"}, got, "the rotation runs over the earlier tier")
	require.Equal(t, "a", do(h, up, StrategyFillFirst, "a"), "a session's connection")
	require.Equal(t, 1, up.Calls("a"))

	h = newHarness()
	up = newUpstream(map[string]behaviour{"b": always(upErr(429, "")), "c": always(upErr(503, ""))})
	require.Equal(t, "a", do(h, up, StrategyFillFirst, ""), "the later tier serves while the earlier cools")
	require.Equal(t, []string{"b", "c", "a"}, up.Order())
}
