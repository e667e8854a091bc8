package node_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// Claude Code (`claude -p`, pinned in .ci/run) against serve and a fake
// upstream of each shape: it must print the fake's answer. The
// Anthropic-shaped upstream gets Claude Code's requests passed through; the
// OpenAI-shaped one gets them translated.
func TestClaudeCode(t *testing.T) {
	bin := agentBin(t, "claude")
	for _, tc := range []struct {
		name, provider, model, path string
	}{
		{"anthropic-shaped upstream", "anthropic-compatible-claude", "claude/claude-sonnet-4-6", "/v1/messages"},
		{"openai-shaped upstream", "openai", chatModel, "/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-up"), upstreamtest.WithoutToolCalls())
			data := map[string]any{"baseUrl": up.URL()}
			if tc.provider != "openai" {
				data["prefix"], data["enabledModels"] = "claude", []string{"claude-sonnet-4-6"}
			}
			sb.CreateConnection(t, map[string]any{"provider": tc.provider, "name": "c", "apiKey": "sk-up", "providerSpecificData": data})
			key := gatewayKey(t, sb)
			out, _ := runAgent(t, t.TempDir(), bin, map[string]string{
				"ANTHROPIC_BASE_URL":                       sb.BaseURL,
				"ANTHROPIC_API_KEY":                        key,
				"ANTHROPIC_MODEL":                          tc.model,
				"ANTHROPIC_SMALL_FAST_MODEL":               tc.model,
				"ANTHROPIC_DEFAULT_HAIKU_MODEL":            tc.model,
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			}, "-p", "say pineapple")
			assert.Contains(t, out, upstreamtest.EchoPrefix, "Claude Code printed the fake's answer")
			assert.Contains(t, out, "say pineapple", "the fake's answer echoes the prompt")
			n := 0
			for _, r := range up.Requests() {
				if r.Path == tc.path {
					n++
					assert.NotContains(t, string(r.Body), key, "the gateway's key never goes upstream")
				}
			}
			require.Positive(t, n, "Claude Code's requests reached the upstream")
		})
	}
}

// The real Claude Code in a tool loop on reasoning models behind an
// openai-compatible connection; the model reasons and calls Read, Claude
// Code runs it and sends the history back, thinking block included, and the
// loop must end with the model's answer. DeepSeek's thinking mode (the
// fake refusing a tool call's turn sent back without its
// reasoning_content) gets the thinking up as that member; a server that
// refuses the member (the fake as Groq: it reasons in a "reasoning" member
// and answers 400 "property 'reasoning_content' is unsupported") is asked
// again without it.
func TestClaudeCodeToolLoopOnReasoningModels(t *testing.T) {
	bin := agentBin(t, "claude")
	for _, tc := range reasoningServers {
		t.Run(tc.name, func(t *testing.T) {
			sb, up, key := reasoningUpstream(t, tc.opt, upstreamtest.WithToolCallsOnly("Read"))
			model := "ds/deepseek-v4-flash"
			out, stderr := runAgent(t, t.TempDir(), bin, map[string]string{
				"ANTHROPIC_BASE_URL":                       sb.BaseURL,
				"ANTHROPIC_API_KEY":                        key,
				"ANTHROPIC_MODEL":                          model,
				"ANTHROPIC_SMALL_FAST_MODEL":               model,
				"ANTHROPIC_DEFAULT_HAIKU_MODEL":            model,
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			}, "-p", "find the go files")
			assert.Contains(t, out, upstreamtest.EchoPrefix, "Claude Code printed the model's answer after the tool (stderr: %s)", stderr)
			tc.check(t, up)
		})
	}
}

// Claude Code (`claude -p`) through a Claude subscription's connection:
// its requests reach Anthropic with the subscription's token as a bearer
// token and its system prompt as it sent it, its own identity line and
// no other added (`claude -p` names itself an Agent SDK agent).
func TestClaudeCodeThroughClaudeSubscription(t *testing.T) {
	bin := agentBin(t, "claude")
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithoutToolCalls())
	sb.CreateConnection(t, map[string]any{"provider": "claude", "name": "max",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()},
		"oauth":                map[string]any{"accessToken": "sk-ant-oat01-max", "refreshToken": "sk-ant-ort01-max", "tokenUrl": "http://127.0.0.1:1/token"}})
	key := gatewayKey(t, sb)
	model := "claude/claude-sonnet-4-6"
	out, stderr := runAgent(t, t.TempDir(), bin, map[string]string{
		"ANTHROPIC_BASE_URL":                       sb.BaseURL,
		"ANTHROPIC_API_KEY":                        key,
		"ANTHROPIC_MODEL":                          model,
		"ANTHROPIC_SMALL_FAST_MODEL":               model,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL":            model,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}, "-p", "say pineapple")
	assert.Contains(t, out, upstreamtest.EchoPrefix, "Claude Code printed the fake's answer (stderr: %s)", stderr)
	n := 0
	for _, r := range up.Requests() {
		if r.Path != "/v1/messages" {
			continue
		}
		n++
		assert.Equal(t, "Bearer sk-ant-oat01-max", r.Header.Get("Authorization"))
		var body map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.Body, &body))
		texts := systemTexts(t, body["system"])
		require.GreaterOrEqual(t, len(texts), 2, "%.200q", texts)
		assert.True(t, strings.HasPrefix(texts[0], "x-anthropic-billing-header:"), "Claude Code's billing block stays first: %.200q", texts[:2])
		assert.Equal(t, "You are a Claude agent, built on Anthropic's Claude Agent SDK.", texts[1], "its own identity line, no other")
	}
	require.Positive(t, n, "Claude Code's requests reached the upstream")

	// Its token counts (/context) go up as it sent them: with no system
	// prompt and so without the identity line, as Claude Code sends them
	// to Anthropic with its own subscription token; the count is of what
	// it sent.
	out, stderr = runAgent(t, t.TempDir(), bin, map[string]string{
		"ANTHROPIC_BASE_URL":                       sb.BaseURL,
		"ANTHROPIC_API_KEY":                        key,
		"ANTHROPIC_MODEL":                          model,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}, "-p", "/context")
	assert.Contains(t, out, "Context Usage", "stderr: %s", stderr)
	n = 0
	for _, r := range up.Requests() {
		if r.Path != upstreamtest.PathCountTokens {
			continue
		}
		n++
		assert.Equal(t, "Bearer sk-ant-oat01-max", r.Header.Get("Authorization"))
		assert.Contains(t, strings.Split(r.Header.Get("anthropic-beta"), ","), "oauth-2025-04-20")
		var body map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.Body, &body))
		_, system := body["system"]
		assert.False(t, system, "a count goes up as Claude Code sent it, not with %s", body["system"])
	}
	require.Positive(t, n, "Claude Code's token counts reached the upstream")
}
