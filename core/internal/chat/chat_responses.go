package chat

import (
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// chatResponses is Chat Completions to a Responses-only upstream (codex).
type chatResponses struct{ toResponses }

func (chatResponses) header(http.Header, inbound) {}
func (chatResponses) errorBody(raw []byte) []byte { return raw }

func (chatResponses) request(in inbound, model string) ([]byte, error) {
	body, err := translate.OpenAIToResponsesRequest(in.body, model)
	if err != nil {
		return nil, requestError(err, "messages")
	}
	return body, nil
}

func (chatResponses) whole(_ inbound, raw []byte, model string) ([]byte, Usage, error) {
	out, u, err := translate.ResponsesToOpenAIResponse(raw, model)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	return out, fromTranslate(u), nil
}

func (chatResponses) events(in inbound, model string) eventTranslator {
	return &responsesToChunks{tr: translate.NewResponsesToChunks(model, in.includeUsage)}
}

// responsesToChunks turns Responses events into chat.completion.chunks.
type responsesToChunks struct{ tr *translate.ResponsesToChunks }

func (r *responsesToChunks) event(name string, data []byte, emit emitFunc) (bool, error) {
	if ev := responsesError(name, data); ev != nil {
		return false, ev
	}
	if err := r.tr.Event(name, data, func(c []byte) error { return emit("", c) }); err != nil {
		return false, err
	}
	return r.tr.Done(), nil
}

func (r *responsesToChunks) finish(emitFunc) (bool, error) { return r.tr.Done(), nil }
func (r *responsesToChunks) usage() Usage                  { return fromTranslate(r.tr.Usage()) }
