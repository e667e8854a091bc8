package node_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Codex (which never sends max_output_tokens) on Claude deep in a long
// conversation: the gateway's own max_tokens (the model's output limit)
// and the input pass the context window, and Anthropic refuses the request
// with the numbers. The gateway asks again for what the window leaves, on
// the same connection: Codex prints the answer, the usage records the one
// answered attempt, and the connection does not cool, where Codex got a
// 400 for a cap it never asked for.
func TestCodexOnClaudePastTheContextWindow(t *testing.T) {
	bin := agentBin(t, "codex")
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithoutToolCalls())
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	up.Enqueue(pathMessages, upstreamtest.AnthropicError(http.StatusBadRequest, "invalid_request_error",
		"input length and `max_tokens` exceed context limit: 190000 + 128000 > 200000, decrease input length or `max_tokens` and try again"))
	key := gatewayKey(t, sb)
	out, errOut, err := runCodex(t, bin, sb.BaseURL, key, "claude/claude-sonnet-4-6", "say pineapple")
	require.NoError(t, err, "codex\nstdout: %s\nstderr: %s", out, errOut)
	t.Logf("codex printed: %q\nstderr: %.2000s", out, errOut)
	assert.Contains(t, out, upstreamtest.EchoPrefix, "Codex printed the fake's answer")

	var caps []int64
	for _, r := range up.Requests() {
		if r.Path != pathMessages {
			continue
		}
		var sent struct {
			MaxTokens int64 `json:"max_tokens"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &sent))
		caps = append(caps, sent.MaxTokens)
	}
	require.GreaterOrEqual(t, len(caps), 2, "%v", caps)
	assert.Greater(t, caps[0], int64(10000), "the gateway's cap, refused")
	assert.Equal(t, int64(10000), caps[1], "asked again for what the window leaves")

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) == len(caps)-1 }, 5*time.Second, 20*time.Millisecond,
		"one usage event an answered request")
	for _, ev := range evs {
		assert.EqualValues(t, http.StatusOK, ev.GetStatus())
		assert.EqualValues(t, 1, ev.GetAttempts(), "the refusal is no attempt of its own")
	}

	r := chatAsk(t, sb, "claude/claude-sonnet-4-6", "again", true)
	assert.Equal(t, http.StatusOK, r.Status, "the connection did not cool: %s", r.Body)
}

// Codex on Claude past the context window with its input alone: Anthropic
// refuses the request ("prompt is too long"), and Codex tells its user it
// ran out of room in the model's context window, as it does on an OpenAI
// upstream's context_length_exceeded, where it printed the error's JSON.
func TestCodexOnClaudePromptTooLong(t *testing.T) {
	bin := agentBin(t, "codex")
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithoutToolCalls())
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	up.Enqueue(pathMessages, upstreamtest.AnthropicError(http.StatusBadRequest, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
	key := gatewayKey(t, sb)
	out, errOut, _ := runCodex(t, bin, sb.BaseURL, key, "claude/claude-sonnet-4-6", "say pineapple")
	t.Logf("codex printed: %q\nstderr: %.2000s", out, errOut)
	assert.Contains(t, out+errOut, "ran out of room in the model's context window")
	assert.NotContains(t, out, upstreamtest.EchoPrefix, "no answer after the refusal")
}
