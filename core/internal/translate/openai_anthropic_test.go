package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestGolden translates every recorded OpenAI request
// (testdata/openai/*.request.json) and every hand-written one
// (testdata/request/*.json); inputs named error_* must fail with a
// RequestError.
func TestRequestGolden(t *testing.T) {
	files := inputs(t, "testdata/openai/*.request.json", "testdata/request/*.json")
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(files[name])
			require.NoError(t, err)
			got, err := OpenAIToAnthropicRequest(body, "claude-sonnet-4-5-20250929", AnthropicOptions{})
			golden := filepath.Join("testdata/golden/request", name+".json")
			if strings.HasPrefix(name, "error_") || name == "chat-bad-request" {
				require.Error(t, err)
				require.ErrorIs(t, err, ErrInvalidRequest)
				var re *RequestError
				require.ErrorAs(t, err, &re)
				goldenJSON(t, golden, map[string]any{"error": err.Error(), "param": re.Param})
				return
			}
			require.NoError(t, err)
			assertAnthropicInvariants(t, got.Body)
			goldenJSON(t, golden, map[string]any{
				"stream":        got.Stream,
				"include_usage": got.IncludeUsage,
				"body":          decodeJSON(t, got.Body),
			})
		})
	}
}

// assertAnthropicInvariants checks what Anthropic enforces on any request:
// a positive max_tokens, turns that alternate starting with the user,
// non-empty content, tool results first in their turn, and tool_use ids
// answered in the next turn.
func assertAnthropicInvariants(t testing.TB, body []byte) {
	t.Helper()
	var req struct {
		Model     string `json:"model"`
		MaxTokens int64  `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Thinking *struct {
			BudgetTokens int64 `json:"budget_tokens"`
		} `json:"thinking"`
	}
	require.NoError(t, json.Unmarshal(body, &req), "%s", body)
	require.NotEmpty(t, req.Model)
	require.Positive(t, req.MaxTokens)
	if req.Thinking != nil {
		require.GreaterOrEqual(t, req.Thinking.BudgetTokens, int64(minThinkingBudget))
		require.Less(t, req.Thinking.BudgetTokens, req.MaxTokens)
	}
	require.NotEmpty(t, req.Messages)
	var pending map[string]bool
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		require.Equal(t, want, m.Role, "message %d", i)
		var blocks []struct {
			Type      string `json:"type"`
			Text      string `json:"text"`
			ID        string `json:"id"`
			ToolUseID string `json:"tool_use_id"`
		}
		if m.Content[0] == '"' {
			var s string
			require.NoError(t, json.Unmarshal(m.Content, &s))
			require.NotEmpty(t, s)
		} else {
			require.NoError(t, json.Unmarshal(m.Content, &blocks))
			require.NotEmpty(t, blocks)
		}
		seenOther := false
		answered := map[string]bool{}
		next := map[string]bool{}
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				require.False(t, seenOther, "message %d: tool_result after other content", i)
				answered[b.ToolUseID] = true
			case "tool_use":
				next[b.ID] = true
			case "text":
				require.NotEmpty(t, b.Text)
				seenOther = true
			default:
				seenOther = true
			}
		}
		for id := range pending {
			require.True(t, answered[id], "tool_use %s unanswered in message %d", id, i)
		}
		pending = next
		// With thinking on, a turn that answers tool calls needs the
		// assistant's turn before it to start with a (signed) thinking
		// block, which a translated history never has: Anthropic answers
		// 400 "a final assistant message must start with a thinking block".
		if req.Thinking != nil && i == len(req.Messages)-1 && len(answered) > 0 {
			t.Fatalf("thinking is on in the middle of a tool-use turn (message %d answers tool calls)", i)
		}
	}
}

func TestRequestShapes(t *testing.T) {
	translate := func(t *testing.T, body string) map[string]any {
		t.Helper()
		got, err := OpenAIToAnthropicRequest([]byte(body), "", AnthropicOptions{})
		require.NoError(t, err)
		return decodeJSON(t, got.Body).(map[string]any)
	}
	t.Run("model from the body when no upstream model is given", func(t *testing.T) {
		got := translate(t, `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`)
		assert.Equal(t, "claude-x", got["model"])
		assert.Equal(t, json.Number("4096"), got["max_tokens"])
		assert.NotContains(t, got, "stream")
	})
	t.Run("tool results lead the merged user turn", func(t *testing.T) {
		got := translate(t, `{"model":"m","messages":[
			{"role":"user","content":"q"},
			{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"a","content":"1"},
			{"role":"user","content":"and"},
			{"role":"tool","tool_call_id":"b","content":"2"}]}`)
		turn := got["messages"].([]any)[2].(map[string]any)["content"].([]any)
		var types []string
		for _, b := range turn {
			types = append(types, b.(map[string]any)["type"].(string)+":"+textOf(b))
		}
		assert.Equal(t, []string{"tool_result:a", "tool_result:b", "text:and"}, types)
	})
	t.Run("HTML-ish text is not escaped", func(t *testing.T) {
		got, err := OpenAIToAnthropicRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"<a> & b"}]}`), "", AnthropicOptions{})
		require.NoError(t, err)
		assert.Contains(t, string(got.Body), `"<a> & b"`)
	})
	t.Run("include_usage only with stream", func(t *testing.T) {
		got, err := OpenAIToAnthropicRequest([]byte(`{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`), "", AnthropicOptions{})
		require.NoError(t, err)
		assert.False(t, got.Stream)
		assert.False(t, got.IncludeUsage)
	})
}

func textOf(b any) string {
	m := b.(map[string]any)
	if s, ok := m["tool_use_id"].(string); ok {
		return s
	}
	s, _ := m["text"].(string)
	return s
}

func TestToolResultsFirst(t *testing.T) {
	mk := func(spec string) []msgBlock {
		var out []msgBlock
		for _, c := range spec {
			if c >= 'A' && c <= 'Z' {
				out = append(out, msgBlock{Type: "tool_result", ToolUseID: string(c)})
			} else {
				out = append(out, msgBlock{Type: "text", Text: string(c)})
			}
		}
		return out
	}
	str := func(bs []msgBlock) string {
		var s strings.Builder
		for _, b := range bs {
			s.WriteString(b.ToolUseID + b.Text)
		}
		return s.String()
	}
	for in, want := range map[string]string{
		"":      "",
		"AB":    "AB",
		"ab":    "ab",
		"ABab":  "ABab",
		"aAbB":  "ABab",
		"abAcB": "ABabc",
		"AaB":   "ABa",
	} {
		blocks := mk(in)
		toolResultsFirst(blocks)
		assert.Equal(t, want, str(blocks), "input %q", in)
	}
}

func TestToolID(t *testing.T) {
	assert.Equal(t, "call_abc-1", ToolID("call_abc-1"))
	assert.Equal(t, "call_tokyo_1", ToolID("call.tokyo:1"))
	assert.Equal(t, "_____", ToolID("é日本"[:5]))
	assert.Equal(t, "", ToolID(""))
}

func TestRequestErrorsAreInvalidRequest(t *testing.T) {
	for _, body := range []string{``, `null`, `[]`, `{"messages":[{"role":"user","content":"x"}]}`, `{"model":"m","messages":[{"role":"user","content":5}]}`} {
		_, err := OpenAIToAnthropicRequest([]byte(body), "", AnthropicOptions{})
		require.Error(t, err, body)
		assert.True(t, errors.Is(err, ErrInvalidRequest), "%q: %v", body, err)
		assert.NotContains(t, err.Error(), "translate.", "no Go type names in %q", err.Error())
	}
}

// Reasoning asked for in a tool loop: Anthropic refuses thinking when the
// turn answering tool calls follows an assistant turn without its signed
// thinking block, and a translated history has none, so thinking stays
// off there (the second turn of every agent loop would fail otherwise); a
// fresh question still thinks.
func TestThinkingOffInsideAToolTurn(t *testing.T) {
	const calls = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
	for _, tc := range []struct {
		name     string
		messages string
		thinks   bool
	}{
		{"fresh question", `[{"role":"user","content":"weather in Paris?"}]`, true},
		{"answering a tool call", `[{"role":"user","content":"weather in Paris?"},` + calls + `,{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`, false},
		{"a new question after a finished tool turn", `[{"role":"user","content":"weather in Paris?"},` + calls +
			`,{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"assistant","content":"Sunny."},{"role":"user","content":"and Rome?"}]`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OpenAIToAnthropicRequest([]byte(`{"model":"m","reasoning_effort":"high","max_completion_tokens":32000,"messages":`+tc.messages+
				`,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`), "claude-x", AnthropicOptions{})
			require.NoError(t, err)
			assertAnthropicInvariants(t, got.Body)
			var body struct {
				Thinking *struct{ Type string } `json:"thinking"`
			}
			require.NoError(t, json.Unmarshal(got.Body, &body))
			assert.Equal(t, tc.thinks, body.Thinking != nil, "%s", got.Body)
		})
	}
}

func TestThinkingBudget(t *testing.T) {
	for effort, want := range map[string]int64{"": 0, "none": 0, "minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768} {
		got, ok := thinkingBudget(effort)
		assert.True(t, ok)
		assert.Equal(t, want, got, effort)
	}
	_, ok := thinkingBudget("max")
	assert.False(t, ok)
}

func TestMsgContentMarshal(t *testing.T) {
	b, err := marshal(msgContent{{Type: "text", Text: "hi <there>"}})
	require.NoError(t, err)
	assert.Equal(t, `"hi <there>"`, string(b))
	b, err = marshal(msgContent{{Type: "text", Text: "a", CacheControl: json.RawMessage(`{"type":"ephemeral"}`)}})
	require.NoError(t, err)
	if diff := cmp.Diff(decodeJSON(t, []byte(`[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`)), decodeJSON(t, b)); diff != "" {
		t.Error(diff)
	}
}

// A request Anthropic refused for its input and max_tokens passing the
// context window asks for what the window leaves, a thinking budget shrunk
// below it (or left out when there is no room to think), the rest of the
// body as it was; a refusal that does not tell, or a window that leaves too
// little, is not fitted.
func TestFitContextWindow(t *testing.T) {
	refusal := func(msg string) string {
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
		return string(b)
	}
	exceed := func(input, maxTokens, limit int) string {
		return refusal(fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again", input, maxTokens, limit))
	}
	const plain = `{"model":"claude-sonnet-4-6","max_tokens":128000,"messages":[{"role":"user","content":"<a & b>"}],"stream":true}`
	const thinking = `{"model":"claude-sonnet-4-6","max_tokens":128000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":16384},"stream":true}`
	const adaptive = `{"model":"claude-sonnet-4-6","max_tokens":128000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"adaptive"}}`
	for _, tc := range []struct {
		name, body, refusal string
		want                string // "": not fitted
	}{
		{"plain", plain, exceed(190000, 128000, 200000),
			`{"model":"claude-sonnet-4-6","max_tokens":10000,"messages":[{"role":"user","content":"<a & b>"}],"stream":true}`},
		{"without backticks", plain, refusal("input length and max_tokens exceed context limit: 190000 + 128000 > 200000, decrease input length or max_tokens and try again"),
			`{"model":"claude-sonnet-4-6","max_tokens":10000,"messages":[{"role":"user","content":"<a & b>"}],"stream":true}`},
		{"in OpenAI's shape", plain, `{"error":{"message":"input length and ` + "`max_tokens`" + ` exceed context limit: 190000 + 128000 > 200000","type":"invalid_request_error"}}`,
			`{"model":"claude-sonnet-4-6","max_tokens":10000,"messages":[{"role":"user","content":"<a & b>"}],"stream":true}`},
		{"one token left", plain, exceed(199999, 128000, 200000),
			`{"model":"claude-sonnet-4-6","max_tokens":1,"messages":[{"role":"user","content":"<a & b>"}],"stream":true}`},
		{"thinking shrunk", thinking, exceed(190000, 128000, 200000),
			`{"model":"claude-sonnet-4-6","max_tokens":10000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":8976},"stream":true}`},
		{"thinking kept", thinking, exceed(100000, 128000, 200000),
			`{"model":"claude-sonnet-4-6","max_tokens":100000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":16384},"stream":true}`},
		{"no room to think", thinking, exceed(198500, 128000, 200000),
			`{"model":"claude-sonnet-4-6","max_tokens":1500,"messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{"adaptive thinking", adaptive, exceed(190000, 128000, 200000),
			`{"model":"claude-sonnet-4-6","max_tokens":10000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"adaptive"}}`},
		{"less than a thinking budget left", thinking, exceed(199000, 128000, 200000),
			`{"model":"claude-sonnet-4-6","max_tokens":1000,"messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{"the window is full", plain, exceed(200000, 128000, 200000), ""},
		{"no less than asked", plain, exceed(50000, 128000, 200000), ""},
		{"no numbers", plain, refusal("input length and `max_tokens` exceed context limit"), ""},
		{"another refusal", plain, refusal("prompt is too long: 250000 tokens > 200000 maximum"), ""},
		{"numbers past int64", plain, refusal("input length and `max_tokens` exceed context limit: 99999999999999999999 + 1 > 200000"), ""},
		{"a text body", plain, "input length and `max_tokens` exceed context limit: 190000 + 128000 > 200000",
			`{"model":"claude-sonnet-4-6","max_tokens":10000,"messages":[{"role":"user","content":"<a & b>"}],"stream":true}`},
		{"a body without max_tokens", `{"model":"m"}`, exceed(190000, 128000, 200000), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FitContextWindow([]byte(tc.body), []byte(tc.refusal), Sampling{})
			if tc.want == "" {
				assert.False(t, ok, "%s", got)
				return
			}
			require.True(t, ok)
			assert.JSONEq(t, tc.want, string(got))
			assert.NotContains(t, string(got), `\u003c`, "text as it was")
		})
	}
}

// A request asked again without thinking is sent the client's sampling as
// one translated without thinking (thinking on, it was left out); one that
// still thinks is sent what it was.
func TestFitContextWindowSampling(t *testing.T) {
	exceed := func(input int) []byte {
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error",
			"message": fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + 128000 > 200000", input)}})
		return b
	}
	const thinking = `{"model":"claude-sonnet-4-6","max_tokens":128000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":16384},"top_p":0.97,"stream":true}`
	for _, tc := range []struct {
		name   string
		input  int
		client string
		want   string
	}{
		{"temperature and top_k", 199000, `{"temperature":0.2,"top_p":0.97,"top_k":40}`,
			`{"model":"claude-sonnet-4-6","max_tokens":1000,"messages":[{"role":"user","content":"hi"}],"temperature":0.2,"top_k":40,"stream":true}`},
		{"temperature past 1", 199000, `{"temperature":1.7}`,
			`{"model":"claude-sonnet-4-6","max_tokens":1000,"messages":[{"role":"user","content":"hi"}],"temperature":1,"stream":true}`},
		{"top_p alone", 199000, `{"top_p":0.97}`,
			`{"model":"claude-sonnet-4-6","max_tokens":1000,"messages":[{"role":"user","content":"hi"}],"top_p":0.97,"stream":true}`},
		{"nothing named", 199000, `{}`,
			`{"model":"claude-sonnet-4-6","max_tokens":1000,"messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{"still thinking", 190000, `{"temperature":0.2,"top_p":0.97,"top_k":40}`,
			`{"model":"claude-sonnet-4-6","max_tokens":10000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":8976},"top_p":0.97,"stream":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FitContextWindow([]byte(thinking), exceed(tc.input), ChatSampling([]byte(tc.client)))
			require.True(t, ok)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
	assert.Nil(t, ResponsesSampling([]byte(`{"top_k":40}`)).TopK, "Responses has no top_k")
}
