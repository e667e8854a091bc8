package node_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// A session stays on the connection that served it under round-robin
// (which alternates requests without one), for each dialect's identity,
// and moves when that connection cools down.
func TestSessionAffinity(t *testing.T) {
	p := newPair(t)
	require.Equal(t, http.StatusOK, p.sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"routingStrategy": "round-robin", "stickyLimit": 1}).Status)
	key := gatewayKey(t, p.sb)
	auth := []string{"Authorization", "Bearer " + key}
	counts := func() (int, int) { return p.primary.Count(pathChat), p.fallback.Count(pathChat) }
	chat := func(headers ...string) {
		t.Helper()
		r := p.sb.Do(t, http.MethodPost, pathChat, map[string]any{"model": chatModel, "messages": []any{map[string]any{"role": "user", "content": "hi"}}},
			append(append([]string{}, auth...), headers...)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}

	// Without a session, round-robin alternates.
	for range 4 {
		chat()
	}
	a, b := counts()
	require.Equal(t, 2, a)
	require.Equal(t, 2, b)

	// With one, every request goes where the first went; the session is
	// written once, not again on each request that stays.
	chat("x-session-id", "sess-1")
	a1, b1 := counts()
	onPrimary := a1 > a
	writes := affinityWrites(t, p.sb)
	for range 5 {
		chat("x-session-id", "sess-1")
	}
	assert.Equal(t, writes, affinityWrites(t, p.sb), "an active session is not written again on every request")
	a2, b2 := counts()
	if onPrimary {
		assert.Equal(t, a1+5, a2, "the session stayed on its connection")
		assert.Equal(t, b1, b2)
	} else {
		assert.Equal(t, b1+5, b2, "the session stayed on its connection")
		assert.Equal(t, a1, a2)
	}

	// Claude Code's metadata.user_id and Codex's prompt_cache_key are
	// identities too.
	body := messagesBody(chatModel, "hi", false)
	body["metadata"] = map[string]any{"user_id": `{"device_id":"d","session_id":"cc-42"}`}
	a3, b3 := counts()
	for range 4 {
		r, raw, _ := postMessages(t, p.sb, key, body)
		require.Equal(t, http.StatusOK, r.StatusCode, string(raw))
	}
	a4, b4 := counts()
	assert.True(t, a4-a3 == 4 || b4-b3 == 4, "Claude Code's session stayed: %d/%d", a4-a3, b4-b3)
	for range 4 {
		r := p.sb.Do(t, http.MethodPost, pathResponses, map[string]any{"model": chatModel, "input": "hi", "prompt_cache_key": "codex-7"}, auth...)
		require.Equal(t, http.StatusOK, r.Status)
	}
	ra, rb := p.primary.Count(pathResponses), p.fallback.Count(pathResponses)
	assert.True(t, ra == 4 || rb == 4, "Codex's session stayed: %d/%d", ra, rb)

	// The session's connection cools: the session moves, and stays moved.
	served, other := p.primary, p.fallback
	if !onPrimary {
		served, other = p.fallback, p.primary
	}
	served.Enqueue(pathChat, upstreamtest.RateLimited("60"))
	before := other.Count(pathChat)
	chat("x-session-id", "sess-1")
	chat("x-session-id", "sess-1")
	chat("x-session-id", "sess-1")
	assert.Equal(t, before+3, other.Count(pathChat), "moved to the healthy connection")
}

// The affinity lives in the spine: a second core replica sends the session
// where the first did.
func TestSessionAffinityAcrossReplicas(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	start := func() *nodetest.Instance {
		cfg := nodetest.Config(t.TempDir())
		cfg.NATSURL = natsURL
		cfg.SecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
		return nodetest.Start(t, cfg, node.RoleCore, node.RoleEdge)
	}
	a := start()
	one, two := upstreamtest.New(t), upstreamtest.New(t)
	for i, up := range []*upstreamtest.Server{one, two} {
		a.CreateConnection(t, map[string]any{"provider": "openai", "name": fmt.Sprint("c", i), "apiKey": "k", "priority": 1,
			"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	}
	require.Equal(t, http.StatusOK, a.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"routingStrategy": "round-robin", "stickyLimit": 1}).Status)
	key := gatewayKey(t, a)
	b := start()
	send := func(in *nodetest.Instance) int {
		r := in.Do(t, http.MethodPost, pathChat, map[string]any{"model": chatModel, "messages": []any{map[string]any{"role": "user", "content": "hi"}}},
			"Authorization", "Bearer "+key, "x-session-id", "shared-session")
		return r.Status
	}
	require.Equal(t, http.StatusOK, send(a))
	first := one
	if two.Count(pathChat) == 1 {
		first = two
	}
	require.Eventually(t, func() bool { return send(b) == http.StatusOK }, 10*time.Second, 50*time.Millisecond,
		"the second replica sees the connections and the key")
	for range 3 {
		require.Equal(t, http.StatusOK, send(b))
	}
	assert.Equal(t, one.Count(pathChat)+two.Count(pathChat), first.Count(pathChat), "every request of the session went to one connection")
}

// affinityWrites is how many writes the affinity bucket has taken.
func affinityWrites(t *testing.T, sb *nodetest.Instance) uint64 {
	t.Helper()
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), spine.BucketAffinity)
	require.NoError(t, err)
	st, err := kv.Status(context.Background())
	require.NoError(t, err)
	return st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq
}
