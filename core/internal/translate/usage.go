package translate

import "math"

// Usage is the token accounting of one answer, in OpenAI's terms.
//
// PromptTokens counts every input token, cached or not
// (input_tokens + cache_read_input_tokens + cache_creation_input_tokens);
// CachedTokens (cache reads) and CacheCreationTokens (cache writes) are
// subsets of it. CompletionTokens is Anthropic's output_tokens, which
// already includes any thinking; Anthropic does not report thinking tokens
// apart, so ReasoningTokens stays 0 for it and must never be added on top.
type Usage struct {
	PromptTokens        int64
	CompletionTokens    int64
	TotalTokens         int64
	CachedTokens        int64
	CacheCreationTokens int64
	ReasoningTokens     int64
}

// msgUsage is Anthropic's usage object.
type msgUsage struct {
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	ServiceTier              string `json:"service_tier"`
}

// usage converts Anthropic's counts. Negative counts (never sent by a sane
// upstream) count as zero and sums saturate, so a bad upstream cannot make
// a bill negative or wrap around.
func (u msgUsage) usage() Usage {
	in, out := nonNegative(u.InputTokens), nonNegative(u.OutputTokens)
	read, write := nonNegative(u.CacheReadInputTokens), nonNegative(u.CacheCreationInputTokens)
	prompt := addSat(addSat(in, read), write)
	return Usage{
		PromptTokens:        prompt,
		CompletionTokens:    out,
		TotalTokens:         addSat(prompt, out),
		CachedTokens:        read,
		CacheCreationTokens: write,
	}
}

// OpenAIUsage converts OpenAI's counts (Chat's prompt and completion
// tokens, or Responses' input and output tokens) as they are billed:
// negatives count as zero, cache reads are capped at the prompt, and a
// missing total is the sum, so a bad upstream cannot make a bill negative
// or wrap around on any route, passed through or translated.
func OpenAIUsage(prompt, completion, total, cached, reasoning int64) Usage {
	p, c, t := nonNegative(prompt), nonNegative(completion), nonNegative(total)
	if t == 0 {
		t = addSat(p, c)
	}
	return Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: t,
		CachedTokens: min(nonNegative(cached), p), ReasoningTokens: nonNegative(reasoning)}
}

func nonNegative(n int64) int64 { return max(n, 0) }

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// appendUsage appends OpenAI's usage object, with every detail field the
// OpenAI API itself sends.
func appendUsage(b []byte, u Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, u.PromptTokens)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, u.CompletionTokens)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, u.TotalTokens)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, u.CachedTokens)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, u.ReasoningTokens)
	return append(b, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}
