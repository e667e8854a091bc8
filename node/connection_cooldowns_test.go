package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// An operator who mends a failing connection (pastes the right API key
// for a refused one, points it at another base URL, switches it off and on
// again) has the next request use it at once, not answered from the
// cooldown the old settings earned (2 minutes for a 401, 30 s for a 503).
// A change that does not touch how the connection is reached (a new name)
// leaves its cooldown running.
func TestConnectionChangeEndsItsCooldowns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     string // the connection's key; the upstream takes "sk-new-4c1d"
		broken  bool   // the connection starts on an upstream that always answers 503
		once    bool   // the upstream answers its first call with 503
		patches func(upURL string) []map[string]any
		ended   bool
	}{
		{name: "new API key", key: "sk-old-9a7b", ended: true,
			patches: func(string) []map[string]any { return []map[string]any{{"apiKey": "sk-new-4c1d"}} }},
		{name: "new base URL", key: "sk-new-4c1d", broken: true, ended: true,
			patches: func(u string) []map[string]any {
				return []map[string]any{{"providerSpecificData": map[string]any{"baseUrl": u}}}
			}},
		{name: "reactivated", key: "sk-new-4c1d", once: true, ended: true,
			patches: func(string) []map[string]any { return []map[string]any{{"isActive": false}, {"isActive": true}} }},
		{name: "renamed", key: "sk-new-4c1d", once: true, ended: false,
			patches: func(string) []map[string]any { return []map[string]any{{"name": "renamed"}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-new-4c1d"))
			broken := upstreamtest.New(t)
			broken.SetDefault(pathChat, upstreamtest.Overloaded())
			if tc.once {
				up.Enqueue(pathChat, upstreamtest.Overloaded())
			}
			base := up.URL()
			if tc.broken {
				base = broken.URL()
			}
			id := sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": tc.key,
				"providerSpecificData": map[string]any{"baseUrl": base}})

			r := chatAsk(t, sb, chatModel, "a", false)
			require.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
			calls := up.Count(pathChat)

			for _, patch := range tc.patches(up.URL()) {
				p := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, patch)
				require.Equal(t, http.StatusOK, p.Status, "%s", p.Body)
			}

			r = chatAsk(t, sb, chatModel, "b", false)
			if !tc.ended {
				assert.Equal(t, http.StatusServiceUnavailable, r.Status, "still cooling: %s", r.Body)
				assert.Equal(t, calls, up.Count(pathChat), "not called while cooling")
				return
			}
			assert.Equal(t, http.StatusOK, r.Status, "the mended connection answers: %s", r.Body)
			assert.Equal(t, calls+1, up.Count(pathChat), "the mended connection was called")
		})
	}
}

// A deleted connection's cooldown goes with it: the operator's "connections
// cooling" gauge no longer counts a connection that does not exist (a
// Retry-After may have said a day).
func TestDeletedConnectionStopsCooling(t *testing.T) {
	p := newPair(t)
	p.primary.Enqueue(pathChat, upstreamtest.RateLimited("3600"))
	requireAnswer(t, chatAsk(t, p.sb, chatModel, "a", false), "a")
	settled(t, p.sb, 1, cooling("rate_limited", 1))

	require.Equal(t, http.StatusOK, p.sb.Admin(t, http.MethodDelete, "/api/providers/"+p.primaryID, nil).Status)
	m := p.sb.Metrics(t)
	assert.Equal(t, 0.0, m.Value("switchboard_connections_cooling", "reason", "rate_limited"),
		"the deleted connection is still counted as cooling")
	r := p.sb.Admin(t, http.MethodGet, "/api/cooldowns", nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Empty(t, r.JSON["cooldowns"], "the deleted connection's cooldown is still listed")
}
