package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDeliveredCountsTextOfChunks(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		chars  int64
	}{
		{"content", []string{`{"choices":[{"delta":{"content":"Hello"}}]}`, `{"choices":[{"delta":{"content":" world"}}]}`}, 11},
		{"escapes and multi-byte", []string{`{"choices":[{"delta":{"content":"a\"b\n\u00e9é"}}]}`}, 6},
		{"reasoning and refusal", []string{`{"choices":[{"delta":{"reasoning_content":"abcd","refusal":"no"}}]}`}, 6},
		{"tool call arguments", []string{`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{\"x\":1}"}}]}}]}`}, 7},
		{"null content", []string{`{"choices":[{"delta":{"content":null,"role":"assistant"}}]}`}, 0},
		{"truncated", []string{`{"choices":[{"delta":{"content":"abc`}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d delivered
			for _, c := range tt.chunks {
				d.add([]byte(c))
			}
			assert.Equal(t, tt.chars, d.chars)
		})
	}
}

func TestDeliveredBill(t *testing.T) {
	d := delivered{chars: 41}
	assert.Equal(t, Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10, Partial: true}, d.bill(Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}), "reported usage wins")
	assert.Equal(t, Usage{CompletionTokens: 11, TotalTokens: 11, Partial: true, Estimated: true}, d.bill(Usage{}))
}

func FuzzDeliveredAdd(f *testing.F) {
	f.Add([]byte(`{"choices":[{"delta":{"content":"a\u00e9\\"}}]}`))
	f.Add([]byte(`"content": "\`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d delivered
		d.add(b)
		if d.chars < 0 || d.chars > int64(len(b)) {
			t.Fatalf("counted %d characters in %d bytes", d.chars, len(b))
		}
	})
}
