package chat

import (
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// messagesResponses is Anthropic Messages to a Responses-only upstream
// (codex): two translators composed through Chat Completions. The request's
// stop_sequences, which the Responses API does not have, are the gateway's
// to apply (stop.go).
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
		return nil, requestError(err, "messages")
	}
	return body, nil
}

func (messagesResponses) whole(in inbound, raw []byte, model string) ([]byte, Usage, error) {
	stops := requestStops(in)
	raw, seq, estimated := cutResponse(in, raw, stops)
	chatBody, u, err := translate.ResponsesToOpenAIResponse(raw, model)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	if seq != "" {
		chatBody = namedStop(chatBody, seq)
	}
	out, _, err := translate.OpenAIToAnthropicResponse(chatBody, model, stops...)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	us := fromTranslate(u)
	us.Estimated = estimated
	return out, us, nil
}

// events reports the gateway's estimate of the input in message_start, as
// messagesOpenAI's do.
func (messagesResponses) events(in inbound, model string) eventTranslator {
	out := translate.NewChunkToMessages(model, requestStops(in)...).WithInputTokens(int64(inputEstimate(in)))
	return &responsesToMessages{in: translate.NewResponsesToChunks(model, true), out: out, stop: newStopStream(in, true)}
}

// responsesToMessages: Responses events to chunks to Anthropic events.
type responsesToMessages struct {
	in   *translate.ResponsesToChunks
	out  *translate.ChunkToMessages
	stop *stopStream // nil without stop sequences
}

func (r *responsesToMessages) event(name string, data []byte, emit emitFunc) (bool, error) {
	if ev := responsesError(name, data); ev != nil {
		return false, ev.anthropicShaped()
	}
	if err := r.stop.event(r.in, name, data, func(c []byte) error { return r.out.Chunk(c, translate.Emit(emit)) }); err != nil {
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
func (r *responsesToMessages) usage() Usage { return r.stop.usage(fromTranslate(r.in.Usage())) }
