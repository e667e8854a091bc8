package credential

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A preferred candidate (a session's connection) goes first whatever the
// strategy, without moving the round-robin rotation of other requests, and
// is passed over while it cools down.
func TestDoPrefer(t *testing.T) {
	do := func(h *harness, up *fakeUpstream, strategy, prefer string) string {
		t.Helper()
		res, err := h.eng.Do(context.Background(), Request{MachineID: "m1", Provider: "openai", Model: model,
			Candidates: cands("a", "b", "c"), Strategy: strategy, StickyLimit: 1, Prefer: prefer}, up.attempt)
		require.NoError(t, err)
		return res.Candidate.ConnectionID
	}

	h := newHarness()
	up := newUpstream(nil)
	require.Equal(t, "c", do(h, up, StrategyFillFirst, "c"), "fill-first")
	require.Equal(t, "a", do(h, up, StrategyRoundRobin, ""))
	require.Equal(t, "b", do(h, up, StrategyRoundRobin, "b"))
	require.Equal(t, "b", do(h, up, StrategyRoundRobin, "b"))
	require.Equal(t, "b", do(h, up, StrategyRoundRobin, ""), "the session's requests did not move the rotation")
	require.Equal(t, "c", do(h, up, StrategyRoundRobin, "unknown"), "an unknown preference is no preference: the rotation goes on")

	h = newHarness()
	up = newUpstream(map[string]behaviour{"b": always(upErr(429, ""))})
	require.Equal(t, "a", do(h, up, StrategyFillFirst, "b"), "a failing preference falls back")
	require.Equal(t, 1, up.Calls("b"))
	require.Equal(t, "a", do(h, up, StrategyFillFirst, "b"), "and is passed over while it cools")
	require.Equal(t, 1, up.Calls("b"))
}
