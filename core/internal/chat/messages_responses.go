package chat

import (
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// messagesResponses is Anthropic Messages to a Responses-only upstream
// (codex): two translators composed through Chat Completions.
type messagesResponses struct {
	toResponses
	opts translate.ChatOptions
}

func (messagesResponses) header(http.Header, inbound) {}
func (messagesResponses) errorBody(raw []byte) []byte { return raw }

func (m messagesResponses) request(in inbound, model string) ([]byte, error) {
	chatBody, err := translate.AnthropicToOpenAIRequest(in.body, model, m.opts)
	if err != nil {
		return nil, requestError(err, "messages")
	}
	body, err := translate.OpenAIToResponsesRequest(chatBody, model)
	if err != nil {
		re := requestError(err, "messages").(*RequestError)
		if re.Param == "stop" { // the chat request's stop is the request's stop_sequences
			re.Param = "stop_sequences"
		}
		return nil, re
	}
	return body, nil
}

func (messagesResponses) whole(_ inbound, raw []byte, model string) ([]byte, Usage, error) {
	chatBody, u, err := translate.ResponsesToOpenAIResponse(raw, model)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	out, _, err := translate.OpenAIToAnthropicResponse(chatBody, model)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	return out, fromTranslate(u), nil
}

func (messagesResponses) events(_ inbound, model string) eventTranslator {
	return &responsesToMessages{in: translate.NewResponsesToChunks(model, true), out: translate.NewChunkToMessages(model)}
}

// responsesToMessages: Responses events to chunks to Anthropic events.
type responsesToMessages struct {
	in  *translate.ResponsesToChunks
	out *translate.ChunkToMessages
}

func (r *responsesToMessages) event(name string, data []byte, emit emitFunc) (bool, error) {
	if ev := responsesError(name, data); ev != nil {
		return false, ev.anthropicShaped()
	}
	err := r.in.Event(name, data, func(c []byte) error { return r.out.Chunk(c, translate.Emit(emit)) })
	if err != nil {
		return false, err
	}
	return r.in.Done(), nil
}

func (r *responsesToMessages) finish(emit emitFunc) (bool, error) {
	if !r.in.Done() {
		return false, nil
	}
	return r.out.Finish(translate.Emit(emit))
}
func (r *responsesToMessages) usage() Usage { return fromTranslate(r.in.Usage()) }
