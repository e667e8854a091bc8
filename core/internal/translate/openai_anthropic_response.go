package translate

import (
	"crypto/rand"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// OpenAI Chat Completions answers to Anthropic Messages answers, for
// /v1/messages callers whose model lives on an OpenAI-shaped upstream.

// ChatUsage is OpenAI's usage object (Chat Completions).
type ChatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// UnmarshalJSON reads the usage as encoding/json would, a count written as
// a whole-valued number with a fraction or exponent (3.0, as some
// compatible servers send) read as that count. A count that is not a
// whole number, or a usage that is not an object, counts nothing: the
// answer is still read.
func (u *ChatUsage) UnmarshalJSON(b []byte) error {
	var w struct {
		PromptTokens            tokenCount   `json:"prompt_tokens"`
		CompletionTokens        tokenCount   `json:"completion_tokens"`
		TotalTokens             tokenCount   `json:"total_tokens"`
		PromptTokensDetails     tokenDetails `json:"prompt_tokens_details"`
		CompletionTokensDetails tokenDetails `json:"completion_tokens_details"`
	}
	if json.Unmarshal(b, &w) != nil {
		*u = ChatUsage{}
		return nil
	}
	u.PromptTokens, u.CompletionTokens, u.TotalTokens = int64(w.PromptTokens), int64(w.CompletionTokens), int64(w.TotalTokens)
	u.PromptTokensDetails.CachedTokens = int64(w.PromptTokensDetails.CachedTokens)
	u.CompletionTokensDetails.ReasoningTokens = int64(w.CompletionTokensDetails.ReasoningTokens)
	return nil
}

// tokenDetails is a usage's prompt_tokens_details or
// completion_tokens_details: details that are not an object count
// nothing, and leave the counts beside them standing.
type tokenDetails struct {
	CachedTokens    tokenCount `json:"cached_tokens"`
	ReasoningTokens tokenCount `json:"reasoning_tokens"`
}

func (d *tokenDetails) UnmarshalJSON(b []byte) error {
	type plain tokenDetails
	var p plain
	if json.Unmarshal(b, &p) == nil {
		*d = tokenDetails(p)
	}
	return nil
}

// tokenCount is a count of tokens in JSON: an integer, or a whole-valued
// number written otherwise (3.0, 3e1). Anything else reads as 0.
type tokenCount int64

func (c *tokenCount) UnmarshalJSON(b []byte) error {
	*c = tokenCount(TokenCount(b))
	return nil
}

// TokenCount reads a JSON value as a count of tokens: an integer, or a
// whole-valued number written otherwise (3.0, 3e1, as some compatible
// servers send); anything else is 0.
func TokenCount(b []byte) int64 {
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		return n
	}
	var f float64
	if json.Unmarshal(b, &f) == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return int64(f)
	}
	return 0
}

// Usage converts; completion tokens already include reasoning tokens, which
// are kept apart only for reporting, never added again.
func (u *ChatUsage) Usage() Usage {
	if u == nil {
		return Usage{}
	}
	return OpenAIUsage(u.PromptTokens, u.CompletionTokens, u.TotalTokens,
		u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens)
}

// anthropicUsage is Anthropic's usage object of an OpenAI usage:
// input_tokens excludes cache reads, which are reported apart.
func anthropicUsage(u Usage) map[string]int64 {
	return map[string]int64{
		"input_tokens":                u.PromptTokens - u.CachedTokens,
		"output_tokens":               u.CompletionTokens,
		"cache_read_input_tokens":     u.CachedTokens,
		"cache_creation_input_tokens": u.CacheCreationTokens,
	}
}

type chatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Message struct {
			Content          *string         `json:"content"`
			Refusal          *string         `json:"refusal"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
			ToolCalls        []chatToolCallS `json:"tool_calls"`
		} `json:"message"`
		FinishReason string          `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
		MatchedStop  json.RawMessage `json:"matched_stop"`
	} `json:"choices"`
	Usage *ChatUsage `json:"usage"`
}

// chatToolCallS is a tool call whose arguments are the usual JSON string.
type chatToolCallS struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// stopReason maps OpenAI's finish_reason to Anthropic's stop_reason;
// toolCalls tells whether the answer called tools. An answer that calls
// tools and finishes with "stop" (Gemini's always do, OpenAI's do under a
// forced tool_choice) stops for tool_use: agent loops look for it.
func stopReason(finish string, toolCalls bool) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	case "stop":
		if toolCalls {
			return "tool_use"
		}
	}
	return "end_turn"
}

// stopSequence is the request's stop sequence an answer that finished with
// "stop" stopped on, as the upstream names it ("": none it names). OpenAI
// does not say whether "stop" was a sequence or the model's own end; vLLM
// names the sequence in the choice's stop_reason and SGLang in its
// matched_stop (each a token id instead when the model ended). A string
// the request did not ask for (a model's own stop word) is not one.
func stopSequence(stops []string, finish string, named ...json.RawMessage) string {
	if finish != "stop" || len(stops) == 0 {
		return ""
	}
	for _, raw := range named {
		if s := rawString(raw); s != "" && slices.Contains(stops, s) {
			return s
		}
	}
	return ""
}

// stopFields are the stop_reason and stop_sequence of an answer: an
// answer without tool calls that stopped on one of the request's sequences
// (seq) stops for stop_sequence.
func stopFields(finish string, toolCalls bool, seq string) (string, any) {
	if seq != "" && !toolCalls {
		return "stop_sequence", seq
	}
	return stopReason(finish, toolCalls), nil
}

// messageID makes an Anthropic-style message id of an OpenAI one.
func messageID(id string) string {
	id = strings.TrimPrefix(id, "chatcmpl-")
	if id == "" {
		return "msg_" + rand.Text()
	}
	return "msg_" + id
}

// toolInputOf is a tool call's arguments as a JSON object ({} when the
// upstream sent something else).
func toolInputOf(args string) json.RawMessage {
	raw := json.RawMessage(strings.TrimSpace(args))
	if isJSONObject(raw) && json.Valid(raw) {
		return raw
	}
	return json.RawMessage(`{}`)
}

// OpenAIToAnthropicResponse translates a chat.completion into a Messages
// answer for model: reasoning becomes a thinking block, text a text block,
// tool calls tool_use blocks. stops are the request's stop sequences, for
// the stop_sequence the answer stopped on where the upstream names it.
func OpenAIToAnthropicResponse(body []byte, model string, stops ...string) ([]byte, Usage, error) {
	var in chatCompletion
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Usage{}, malformed("completion is not valid JSON")
	}
	if len(in.Choices) == 0 {
		return nil, Usage{}, malformed("completion has no choices")
	}
	ch := in.Choices[0]
	content := []map[string]any{}
	reasoning := ch.Message.ReasoningContent
	if reasoning == nil {
		reasoning = ch.Message.Reasoning
	}
	if reasoning != nil && *reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": *reasoning, "signature": ""})
	}
	if ch.Message.Content != nil && *ch.Message.Content != "" {
		content = append(content, map[string]any{"type": "text", "text": *ch.Message.Content})
	} else if ch.Message.Refusal != nil && *ch.Message.Refusal != "" {
		content = append(content, map[string]any{"type": "text", "text": *ch.Message.Refusal})
	}
	for _, tc := range ch.Message.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": callID(tc.ID, "toolu_"), "name": tc.Function.Name, "input": toolInputOf(tc.Function.Arguments)})
	}
	u := in.Usage.Usage()
	reason, seq := stopFields(ch.FinishReason, len(ch.Message.ToolCalls) > 0, stopSequence(stops, ch.FinishReason, ch.StopReason, ch.MatchedStop))
	out, err := marshal(map[string]any{
		"id": messageID(in.ID), "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": reason, "stop_sequence": seq,
		"usage": anthropicUsage(u),
	})
	return out, u, err
}
