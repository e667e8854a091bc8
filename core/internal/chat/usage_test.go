package chat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Usage an upstream reports on a passed-through answer is billed as a
// translated one is: negatives count as zero and cache reads never exceed
// the prompt, so a bad upstream cannot make a bill negative.
func TestPassedThroughUsageIsClampedLikeTranslated(t *testing.T) {
	chat := &usageJSON{PromptTokens: 10, CompletionTokens: -5}
	chat.PromptTokensDetails.CachedTokens = 50
	assert.Equal(t, Usage{PromptTokens: 10, TotalTokens: 10, CachedTokens: 10}, chat.usage())

	resp := &responsesUsage{InputTokens: -3, OutputTokens: 4, TotalTokens: -1}
	resp.OutputTokensDetails.ReasoningTokens = -2
	assert.Equal(t, Usage{CompletionTokens: 4, TotalTokens: 4}, resp.usage())
}

// A whole answer the upstream reported no usage for is billed the
// gateway's count of the request's text and of the answer's, about four
// characters a token; media, ids and the names of types and roles are not
// text. Reported usage stays as it is, and so does the estimate of an
// answer stopped at a sequence (what it delivered, as its stream's).
func TestBilledWhole(t *testing.T) {
	image := `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 4000) + `"}}`
	chatIn, err := parse(DialectChat, []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"12345678"},`+image+`]}],`+
		`"tools":[{"type":"function","function":{"name":"f","description":"abc","parameters":{"type":"object"}}}]}`))
	require.NoError(t, err)
	messagesIn, err := parse(DialectMessages, []byte(`{"model":"m","max_tokens":9,"system":"be brief","messages":[{"role":"user","content":[`+
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+strings.Repeat("A", 4000)+`"}},`+
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"abcd"}}]}]}`))
	require.NoError(t, err)
	responsesIn, err := parse(DialectResponses, []byte(`{"model":"m","instructions":"abcd","input":"12345678"}`))
	require.NoError(t, err)

	completion := []byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"abcdefgh","tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`)
	message := []byte(`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"abcd","signature":"sig"},` +
		`{"type":"text","text":"abcd"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"q":"abc"}}]}`)
	response := []byte(`{"id":"resp_1","object":"response","instructions":"not the answer","output":[` +
		`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"abcd"}],"encrypted_content":"xyz"},` +
		`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"abcd","annotations":[],"logprobs":[{"token":"abcd"}]}]}]}`)

	for _, tc := range []struct {
		name     string
		in       inbound
		answer   []byte
		reported Usage
		want     Usage
	}{
		// 8 + 1 + 3 characters of prompt; 8 + 1 + 2 of answer.
		{"chat", chatIn, completion, Usage{}, Usage{PromptTokens: 3, CompletionTokens: 3, TotalTokens: 6, Estimated: true}},
		// 8 + 4; 4 + 4 + 1 + 3.
		{"messages", messagesIn, message, Usage{}, Usage{PromptTokens: 3, CompletionTokens: 3, TotalTokens: 6, Estimated: true}},
		// 4 + 8; 4 + 4.
		{"responses", responsesIn, response, Usage{}, Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5, Estimated: true}},
		{"reported", chatIn, completion, Usage{PromptTokens: 7, CompletionTokens: 1, TotalTokens: 8}, Usage{PromptTokens: 7, CompletionTokens: 1, TotalTokens: 8}},
		{"total only", chatIn, completion, Usage{TotalTokens: 4}, Usage{TotalTokens: 4}},
		{"stopped at a sequence", responsesIn, response, Usage{CompletionTokens: 1, TotalTokens: 1, Estimated: true},
			Usage{CompletionTokens: 1, TotalTokens: 1, Estimated: true}},
		{"nothing to count", responsesIn, []byte(`{"output":[]}`), Usage{}, Usage{PromptTokens: 3, TotalTokens: 3, Estimated: true}},
	} {
		assert.Equal(t, tc.want, billedWhole(tc.in, tc.answer, tc.reported), tc.name)
	}
}

// A stream that ended whole without the upstream's usage is billed as a
// whole answer is, its completion the text it delivered; reported usage,
// and the estimate of a stream stopped at a sequence, stay as they are.
func TestBilledStream(t *testing.T) {
	in, err := parse(DialectChat, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"12345678"}]}`))
	require.NoError(t, err)
	d := delivered{chars: 9}
	assert.Equal(t, Usage{PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5, Estimated: true}, billedStream(in, d, Usage{}))
	assert.Equal(t, Usage{PromptTokens: 7, TotalTokens: 7}, billedStream(in, d, Usage{PromptTokens: 7, TotalTokens: 7}))
	stopped := Usage{CompletionTokens: 1, TotalTokens: 1, Estimated: true}
	assert.Equal(t, stopped, billedStream(in, d, stopped))
}

// An estimate, or a stream cut after it reached the client, gets the
// request's text as its prompt when the upstream told none (it read the
// prompt all the same, even when no text came back); a prompt the upstream
// told, and an answer that is neither, stay as they are.
func TestWithPrompt(t *testing.T) {
	in, err := parse(DialectChat, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"12345678"}]}`))
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		in, out Usage
	}{
		{"estimated completion", Usage{CompletionTokens: 3, TotalTokens: 3, Estimated: true}, Usage{PromptTokens: 2, CompletionTokens: 3, TotalTokens: 5, Estimated: true}},
		{"cut before any text", Usage{Partial: true}, Usage{PromptTokens: 2, TotalTokens: 2, Partial: true, Estimated: true}},
		{"cut, prompt told", Usage{PromptTokens: 7, TotalTokens: 7, Partial: true}, Usage{PromptTokens: 7, TotalTokens: 7, Partial: true}},
		{"reported whole", Usage{PromptTokens: 7, CompletionTokens: 1, TotalTokens: 8}, Usage{PromptTokens: 7, CompletionTokens: 1, TotalTokens: 8}},
		{"nothing (a failed attempt)", Usage{}, Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.out, withPrompt(in, tc.in))
		})
	}
}

// A whole answer whose upstream reported its usage is billed that usage
// without the answer being read again: every request pays for a read.
func TestBilledWholeReadsNothingWhenReported(t *testing.T) {
	in, err := parse(DialectChat, []byte(`{"model":"m","messages":[{"role":"user","content":"12345678"}]}`))
	require.NoError(t, err)
	answer := []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how can I help?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}}`)
	u := Usage{PromptTokens: 9, CompletionTokens: 7, TotalTokens: 16}
	require.Equal(t, u, billedWhole(in, answer, u))
	assert.Zero(t, testing.AllocsPerRun(100, func() { billedWhole(in, answer, u) }))
}
