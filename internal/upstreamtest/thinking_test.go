package upstreamtest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

func TestThinkingModeAnswersWithReasoning(t *testing.T) {
	s := upstreamtest.New(t, upstreamtest.WithThinkingMode())
	resp, body := post(t, s, upstreamtest.PathChatCompletions,
		`{"model":"deepseek-v4-flash","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[`+weatherTool+`]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var got struct {
		Choices []struct {
			Message struct {
				ReasoningContent string            `json:"reasoning_content"`
				ToolCalls        []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, upstreamtest.ThinkingText, got.Choices[0].Message.ReasoningContent)
	require.Len(t, got.Choices[0].Message.ToolCalls, 1)

	evs := stream(t, s, upstreamtest.PathChatCompletions,
		`{"model":"deepseek-v4-flash","stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	var reasoning, text strings.Builder
	for _, ev := range evs[:len(evs)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					ReasoningContent string `json:"reasoning_content"`
					Content          string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &c))
		for _, ch := range c.Choices {
			require.False(t, ch.Delta.ReasoningContent != "" && text.Len() > 0, "reasoning after the text")
			reasoning.WriteString(ch.Delta.ReasoningContent)
			text.WriteString(ch.Delta.Content)
		}
	}
	require.Equal(t, upstreamtest.ThinkingText, reasoning.String())
	require.Equal(t, "echo: Hi", text.String())
}

func TestThinkingModeRefusesToolTurnWithoutReasoning(t *testing.T) {
	s := upstreamtest.New(t, upstreamtest.WithThinkingMode())
	history := func(reasoning string) string {
		return `{"model":"deepseek-v4-pro","tools":[` + weatherTool + `],"messages":[{"role":"user","content":"Weather?"},` +
			`{"role":"assistant","content":null` + reasoning + `,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`
	}
	resp, body := post(t, s, upstreamtest.PathChatCompletions, history(""))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.JSONEq(t, `{"error":{"message":"The `+"`"+`reasoning_content`+"`"+` in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`, string(body))

	for _, r := range []string{`,"reasoning_content":""`, `,"reasoning_content":"It needs the weather."`} {
		resp, body = post(t, s, upstreamtest.PathChatCompletions, history(r))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Contains(t, string(body), `"content":"echo: sunny"`)
	}

	// Without the mode the history is taken as it is.
	plain := upstreamtest.New(t)
	resp, body = post(t, plain, upstreamtest.PathChatCompletions, history(""))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.NotContains(t, string(body), "reasoning_content")
}
