package chat

import (
	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// messagesOpenAI is Anthropic Messages to an OpenAI-shaped (Chat
// Completions) upstream. Errors stay in OpenAI's shape; the edge's
// /v1/messages route renders every error in Anthropic's.
type messagesOpenAI struct{ toChatWith }

func (m messagesOpenAI) request(in inbound, model string) ([]byte, error) {
	body, err := translate.AnthropicToOpenAIRequest(in.body, model, m.opts)
	if err != nil {
		return nil, requestError(err, "messages")
	}
	return body, nil
}

func (messagesOpenAI) whole(in inbound, raw []byte, model string) ([]byte, Usage, error) {
	out, u, err := translate.OpenAIToAnthropicResponse(raw, model, requestStops(in)...)
	if err != nil {
		return nil, Usage{}, invalidCompletion(raw)
	}
	return out, fromTranslate(u), nil
}

// events reports the gateway's estimate of the input in message_start, as
// Anthropic reports its count there; the upstream's comes at the end.
func (messagesOpenAI) events(in inbound, model string) eventTranslator {
	return &chunksToMessages{tr: translate.NewChunkToMessages(model, requestStops(in)...).WithInputTokens(int64(inputEstimate(in)))}
}

// chunksToMessages turns chat.completion.chunks into Anthropic events.
type chunksToMessages struct{ tr *translate.ChunkToMessages }

func (c *chunksToMessages) event(_ string, data []byte, emit emitFunc) (bool, error) {
	if translate.IsDone(data) {
		c.tr.Done()
		return true, nil
	}
	if ev := chunkError(data); ev != nil {
		return false, ev.anthropicShaped()
	}
	if err := c.tr.Chunk(data, translate.Emit(emit)); err != nil {
		return false, err
	}
	return false, nil
}

func (c *chunksToMessages) finish(emit emitFunc) (bool, error) {
	return c.tr.Finish(translate.Emit(emit))
}
func (c *chunksToMessages) usage() Usage { return fromTranslate(c.tr.Usage()) }
