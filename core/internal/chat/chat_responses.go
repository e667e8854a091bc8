package chat

import (
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// chatResponses is Chat Completions to a Responses-only upstream (codex).
// The request's stop sequences, which the Responses API does not have, are
// the gateway's to apply (stop.go).
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

func (chatResponses) whole(in inbound, raw []byte, model string) ([]byte, Usage, error) {
	raw, _, estimated := cutResponse(in, raw, requestStops(in))
	out, u, err := translate.ResponsesToOpenAIResponse(raw, model)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	us := fromTranslate(u)
	us.Estimated = estimated
	return out, us, nil
}

func (chatResponses) events(in inbound, model string) eventTranslator {
	return &responsesToChunks{tr: translate.NewResponsesToChunks(model, in.includeUsage), stop: newStopStream(in, false)}
}

// responsesToChunks turns Responses events into chat.completion.chunks.
type responsesToChunks struct {
	tr   *translate.ResponsesToChunks
	stop *stopStream // nil without stop sequences
}

func (r *responsesToChunks) event(name string, data []byte, emit emitFunc) (bool, error) {
	if ev := responsesError(name, data); ev != nil {
		return false, ev
	}
	if err := r.stop.event(r.tr, name, data, func(c []byte) error { return emit("", c) }); err != nil {
		return false, err
	}
	return r.tr.Done(), nil
}

func (r *responsesToChunks) finish(emitFunc) (bool, error) { return r.tr.Done(), nil }
func (r *responsesToChunks) usage() Usage                  { return r.stop.usage(fromTranslate(r.tr.Usage())) }
