package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
