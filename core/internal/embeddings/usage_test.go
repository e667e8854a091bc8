package embeddings

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An answer is billed the upstream's usage, else the gateway's count of
// the input: a text's characters over four, rounded up, a token array's
// tokens.
func TestBilled(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resp      Response
		req       Request
		want      [2]int64
		estimated bool
	}{
		{"reported", Response{PromptTokens: 9, TotalTokens: 9}, Request{Texts: []string{"x"}}, [2]int64{9, 9}, false},
		{"total only", Response{TotalTokens: 4}, Request{Texts: []string{"x"}}, [2]int64{0, 4}, false},
		{"texts", Response{}, Request{Texts: []string{"hello world", "héllo", "a"}}, [2]int64{3 + 2 + 1, 3 + 2 + 1}, true},
		{"token arrays", Response{}, Request{Tokens: [][]int64{{1, 2, 3}, {4}}}, [2]int64{4, 4}, true},
		{"nothing to count", Response{}, Request{Texts: []string{""}}, [2]int64{0, 0}, false},
		// As a chat answer's usage is billed: a bad upstream cannot make
		// the bill negative.
		{"a negative total", Response{PromptTokens: 9, TotalTokens: -9}, Request{Texts: []string{"x"}}, [2]int64{9, 0}, false},
		{"a negative prompt", Response{PromptTokens: -9, TotalTokens: 9}, Request{Texts: []string{"x"}}, [2]int64{0, 9}, false},
		{"negatives only", Response{PromptTokens: -9, TotalTokens: -9}, Request{Texts: []string{"abcd"}}, [2]int64{1, 1}, true},
	} {
		prompt, total, estimated := tc.resp.Billed(&tc.req)
		assert.Equal(t, tc.want, [2]int64{prompt, total}, tc.name)
		assert.Equal(t, tc.estimated, estimated, tc.name)
	}
}
