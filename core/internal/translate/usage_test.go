package translate

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Token counts written as whole-valued floats (some compatible servers
// send "prompt_tokens":3.0) are read as counts on Messages and Responses
// translated from chat, streamed or whole, and a usage that cannot be read
// counts nothing rather than failing the answer.
func TestChatUsageFloatCounts(t *testing.T) {
	const completion = `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":%s}`
	const chunk = `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],"usage":%s}`
	for _, tc := range []struct {
		name, usage string
		want        Usage
	}{
		{"whole floats", `{"prompt_tokens":3.0,"completion_tokens":2.0,"total_tokens":5.0,"prompt_tokens_details":{"cached_tokens":1.0}}`,
			Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5, CachedTokens: 1}},
		{"exponent", `{"prompt_tokens":3e1,"completion_tokens":2,"total_tokens":32}`,
			Usage{PromptTokens: 30, CompletionTokens: 2, TotalTokens: 32}},
		{"a fraction", `{"prompt_tokens":3.5,"completion_tokens":2,"total_tokens":5}`,
			Usage{CompletionTokens: 2, TotalTokens: 5}},
		{"a string", `{"prompt_tokens":"3","completion_tokens":2}`,
			Usage{CompletionTokens: 2, TotalTokens: 2}},
		{"not an object", `"3"`, Usage{}},
		{"details not objects", `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":[1],"completion_tokens_details":"x"}`,
			Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(fmt.Sprintf(completion, tc.usage))
			_, u, err := OpenAIToAnthropicResponse(body, "m")
			require.NoError(t, err, "messages")
			assert.Equal(t, tc.want, u, "messages")
			_, u, err = Echo{}.Response(body, "m")
			require.NoError(t, err, "responses")
			assert.Equal(t, tc.want, u, "responses")

			emit := func(string, []byte) error { return nil }
			data := []byte(fmt.Sprintf(chunk, tc.usage))
			msgs := NewChunkToMessages("m")
			require.NoError(t, msgs.Chunk(data, emit), "messages stream")
			assert.Equal(t, tc.want, msgs.Usage(), "messages stream")
			resp := Echo{}.Chunks("m")
			require.NoError(t, resp.Chunk(data, emit), "responses stream")
			assert.Equal(t, tc.want, resp.Usage(), "responses stream")
		})
	}
}
