package translate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResponseGolden translates every recorded Anthropic message
// (testdata/anthropic/*.json) and every hand-written one
// (testdata/response/*.json); inputs named error_* must fail.
func TestResponseGolden(t *testing.T) {
	files := inputs(t, "testdata/anthropic/*.json", "testdata/response/*.json")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(files[name])
			require.NoError(t, err)
			before := time.Now()
			got, usage, err := AnthropicToOpenAIResponse(body, "claude-sonnet-4-5")
			golden := filepath.Join("testdata/golden/response", name+".json")
			if strings.HasPrefix(name, "error_") {
				require.Error(t, err)
				var ae *AnthropicError
				if !errors.As(err, &ae) {
					require.ErrorIs(t, err, ErrMalformedUpstream)
				}
				goldenJSON(t, golden, map[string]any{"error": err.Error()})
				return
			}
			require.NoError(t, err)

			// The official client parses it.
			var cc openai.ChatCompletion
			require.NoError(t, json.Unmarshal(got, &cc))
			require.Len(t, cc.Choices, 1)
			assert.Equal(t, usage.PromptTokens, cc.Usage.PromptTokens)
			assert.Equal(t, usage.CompletionTokens, cc.Usage.CompletionTokens)
			assert.Equal(t, usage.TotalTokens, cc.Usage.TotalTokens)
			assert.Equal(t, usage.CachedTokens, cc.Usage.PromptTokensDetails.CachedTokens)
			for _, tc := range cc.Choices[0].Message.ToolCalls {
				assert.True(t, json.Valid([]byte(tc.Function.Arguments)), tc.Function.Arguments)
			}

			goldenJSON(t, golden, map[string]any{
				"body":  normalizeCreated(t, decodeJSON(t, got), before),
				"usage": usage,
			})
		})
	}
}

func TestResponseUsageWithCache(t *testing.T) {
	body, err := os.ReadFile("testdata/response/cache_usage.json")
	require.NoError(t, err)
	_, usage, err := AnthropicToOpenAIResponse(body, "m")
	require.NoError(t, err)
	assert.Equal(t, Usage{PromptTokens: 21 + 2048 + 188, CompletionTokens: 17, TotalTokens: 21 + 2048 + 188 + 17, CachedTokens: 2048, CacheCreationTokens: 188}, usage)
}

func TestResponseParallelToolCalls(t *testing.T) {
	body, err := os.ReadFile("testdata/response/parallel_tools.json")
	require.NoError(t, err)
	got, _, err := AnthropicToOpenAIResponse(body, "m")
	require.NoError(t, err)
	var cc openai.ChatCompletion
	require.NoError(t, json.Unmarshal(got, &cc))
	msg := cc.Choices[0].Message
	assert.Equal(t, "tool_calls", cc.Choices[0].FinishReason)
	assert.Equal(t, "I'll check both cities.", msg.Content)
	require.Len(t, msg.ToolCalls, 3)
	type call struct{ ID, Name, Args string }
	var calls []call
	for _, tc := range msg.ToolCalls {
		assert.Equal(t, "function", string(tc.Type))
		calls = append(calls, call{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	assert.Equal(t, []call{
		{"toolu_01Paris", "get_weather", `{"location":"Paris","unit":"celsius"}`},
		{"toolu_02Tokyo", "get_weather", `{"location":"Tokyo"}`},
		{"toolu_03Time", "get_time", `{}`},
	}, calls)
}

// TestResponseMatchesRecordedOpenAIShape checks that a translated response
// has exactly the fields OpenAI's own recorded responses have (recorded
// chat-tools for a tool call, chat-basic for text), apart from
// service_tier, which Anthropic has no equivalent for.
func TestResponseMatchesRecordedOpenAIShape(t *testing.T) {
	for anthropicFile, openaiFile := range map[string]string{
		"messages_with_tools.json": "chat-tools.response.json",
		"messages.json":            "chat-basic.response.json",
	} {
		t.Run(anthropicFile, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata/anthropic", anthropicFile))
			require.NoError(t, err)
			got, _, err := AnthropicToOpenAIResponse(body, "m")
			require.NoError(t, err)
			recorded, err := os.ReadFile(filepath.Join("testdata/openai", openaiFile))
			require.NoError(t, err)
			want := keyPaths(decodeJSON(t, recorded), "")
			delete(want, "service_tier")
			if diff := cmp.Diff(sortedSet(want), sortedSet(keyPaths(decodeJSON(t, got), ""))); diff != "" {
				t.Errorf("fields differ from the recorded OpenAI response (-recorded +ours):\n%s", diff)
			}
		})
	}
}

// keyPaths lists the object keys of v as paths ("choices[].message.role").
func keyPaths(v any, prefix string) map[string]bool {
	out := map[string]bool{}
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			for c := range keyPaths(child, p) {
				out[c] = true
			}
		}
	case []any:
		for _, child := range v {
			for c := range keyPaths(child, prefix+"[]") {
				out[c] = true
			}
		}
	}
	return out
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAnthropicErrorToOpenAI(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string
		status     int
	}{
		{
			name:   "anthropic overloaded",
			body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`,
			want:   `{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`,
			status: 529,
		},
		{
			name:   "anthropic rate limit",
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			want:   `{"error":{"message":"Number of request tokens has exceeded your per-minute rate limit","type":"rate_limit_error","param":null,"code":"rate_limit_error"}}`,
			status: 429,
		},
		{
			name:   "anthropic invalid request",
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`,
			want:   `{"error":{"message":"max_tokens: Field required","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			status: 400,
		},
		{
			name:   "anthropic prompt too long",
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`,
			want:   `{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`,
			status: 400,
		},
		{
			name:   "anthropic input and max_tokens past the window",
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 190000 + 128000 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`,
			want:   `{"error":{"message":"input length and ` + "`max_tokens`" + ` exceed context limit: 190000 + 128000 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`,
			status: 400,
		},
		{
			name:   "anthropic authentication",
			body:   `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			want:   `{"error":{"message":"invalid x-api-key","type":"authentication_error","param":null,"code":"authentication_error"}}`,
			status: 401,
		},
		{
			name:   "already OpenAI-shaped",
			body:   `{"error":{"code":"unsupported_parameter","message":"Unsupported parameter: 'max_tokens'","param":"max_tokens","type":"invalid_request_error"}}`,
			want:   `{"error":{"message":"Unsupported parameter: 'max_tokens'","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`,
			status: 400,
		},
		{
			name:   "OpenAI quota",
			body:   `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			want:   `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			status: 429,
		},
		{
			name:   "error as a string",
			body:   `{"error":"model not loaded"}`,
			want:   `{"error":{"message":"model not loaded","type":"server_error","param":null,"code":"api_error"}}`,
			status: 500,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AnthropicErrorToOpenAI([]byte(tc.body))
			if diff := cmp.Diff(decodeJSON(t, []byte(tc.want)), decodeJSON(t, got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var oe struct {
				Error struct{ Message, Type string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal(got, &oe))
			assert.NotEmpty(t, oe.Error.Message)
			assert.Equal(t, tc.status, parseAnthropicError([]byte(tc.body)).Status())
		})
	}
	// A body that says no message is left as it is: the client gets the
	// gateway's message naming the status, as from an OpenAI-shaped
	// upstream, not the page as the message.
	for name, body := range map[string]string{
		"HTML from a proxy":     "<html><body>502 Bad Gateway</body></html>\n",
		"empty":                 "",
		"JSON of another shape": `{"status":"fail"}`,
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, body, string(AnthropicErrorToOpenAI([]byte(body))))
		})
	}
	t.Run("long bodies are shortened on a rune boundary", func(t *testing.T) {
		got := AnthropicErrorToOpenAI([]byte(strings.Repeat("日", 1000)))
		var oe struct {
			Error struct{ Message string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(got, &oe))
		assert.LessOrEqual(t, len(oe.Error.Message), maxErrorText+len("…"))
		assert.True(t, strings.HasSuffix(oe.Error.Message, "日…"))
	})
}
