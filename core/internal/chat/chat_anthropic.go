package chat

import (
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// chatAnthropic is Chat Completions to an Anthropic-shaped upstream.
type chatAnthropic struct {
	toAnthropic
	opts translate.AnthropicOptions
}

var _ refitter = chatAnthropic{}

func (chatAnthropic) header(http.Header, inbound) {}

func (chatAnthropic) errorBody(raw []byte) []byte { return translate.AnthropicErrorToOpenAI(raw) }

func (c chatAnthropic) request(in inbound, model string) ([]byte, error) {
	tr, err := translate.OpenAIToAnthropicRequest(in.body, model, c.opts)
	if err != nil {
		return nil, requestError(err, "messages")
	}
	return tr.Body, nil
}

func (chatAnthropic) refit(in inbound, body, raw []byte) ([]byte, bool) {
	if in.names("max_tokens") || in.names("max_completion_tokens") {
		return nil, false
	}
	return translate.FitContextWindow(body, raw, translate.ChatSampling(in.body))
}

func (chatAnthropic) whole(_ inbound, raw []byte, model string) ([]byte, Usage, error) {
	out, u, err := translate.AnthropicToOpenAIResponse(raw, model)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid message")
	}
	return out, fromTranslate(u), nil
}

func (chatAnthropic) events(in inbound, model string) eventTranslator {
	return &anthropicToChunks{tr: translate.NewStreamTranslator(model, in.includeUsage)}
}

// anthropicToChunks turns Anthropic events into chat.completion.chunks.
type anthropicToChunks struct{ tr *translate.StreamTranslator }

func (a *anthropicToChunks) event(name string, data []byte, emit emitFunc) (bool, error) {
	if ev := anthropicError(name, data); ev != nil {
		return false, ev.openAIShaped()
	}
	if err := a.tr.Event(name, data, func(chunk []byte) error { return emit("", chunk) }); err != nil {
		return false, err
	}
	return a.tr.Done(), nil
}

func (a *anthropicToChunks) finish(emit emitFunc) (bool, error) {
	if err := a.tr.End(func(chunk []byte) error { return emit("", chunk) }); err != nil {
		return false, err
	}
	return a.tr.Done(), nil
}

func (a *anthropicToChunks) usage() Usage { return fromTranslate(a.tr.Usage()) }
