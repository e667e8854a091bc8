package chat

import (
	"net/http"
	"strings"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// responsesAnthropic is OpenAI Responses to an Anthropic-shaped upstream:
// two translators composed through Chat Completions (Responses to chat to
// Messages, and back).
type responsesAnthropic struct {
	toAnthropic
	opts translate.ChatOptions
	anth translate.AnthropicOptions
}

var _ refitter = responsesAnthropic{}

func (responsesAnthropic) header(http.Header, inbound) {}

func (responsesAnthropic) errorBody(raw []byte) []byte { return translate.AnthropicErrorToOpenAI(raw) }

func (r responsesAnthropic) request(in inbound, model string) ([]byte, error) {
	chatBody, err := translate.ResponsesToOpenAIRequest(in.body, model, r.opts)
	if err != nil {
		return nil, requestError(err, "input")
	}
	tr, err := translate.OpenAIToAnthropicRequest(chatBody, model, r.anth)
	if err != nil {
		re := requestError(err, "input").(*RequestError)
		re.Param = responsesParam(re.Param)
		return nil, re
	}
	return tr.Body, nil
}

func (responsesAnthropic) refit(in inbound, body, raw []byte) ([]byte, bool) {
	if in.names("max_output_tokens") {
		return nil, false
	}
	return translate.FitContextWindow(body, raw, translate.ResponsesSampling(in.body))
}

// responsesParam names the Responses request's field behind a field of the
// chat request made of it (whose messages and tools are not numbered as
// the request's input and tools are).
func responsesParam(param string) string {
	field, _, _ := strings.Cut(param, ".")
	field, _, _ = strings.Cut(field, "[")
	switch field {
	case "max_tokens", "max_completion_tokens":
		return "max_output_tokens"
	case "reasoning_effort":
		return "reasoning.effort"
	case "response_format":
		return "text.format"
	case "messages":
		return "input"
	case "tools":
		return "tools"
	}
	return param
}

func (responsesAnthropic) whole(in inbound, raw []byte, model string) ([]byte, Usage, error) {
	chatBody, u, err := translate.AnthropicToOpenAIResponse(raw, model)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid message")
	}
	out, err := in.echo.ResponseWithUsage(chatBody, model, u)
	if err != nil {
		return nil, Usage{}, badUpstream("upstream returned an invalid message")
	}
	return out, fromTranslate(u), nil
}

func (responsesAnthropic) events(in inbound, model string) eventTranslator {
	return &anthropicToResponses{
		in:  translate.NewStreamTranslator(model, true),
		out: in.echo.Chunks(model),
	}
}

// anthropicToResponses: Anthropic events to chunks to Responses events.
type anthropicToResponses struct {
	in  *translate.StreamTranslator
	out *translate.ChunkToResponses
}

func (a *anthropicToResponses) event(name string, data []byte, emit emitFunc) (bool, error) {
	if ev := anthropicError(name, data); ev != nil {
		return false, ev.openAIShaped()
	}
	err := a.in.Event(name, data, func(chunk []byte) error { return a.out.Chunk(chunk, translate.Emit(emit)) })
	if err != nil {
		return false, err
	}
	return a.in.Done(), nil
}

func (a *anthropicToResponses) finish(emit emitFunc) (bool, error) {
	if err := a.in.End(func(chunk []byte) error { return a.out.Chunk(chunk, translate.Emit(emit)) }); err != nil {
		return false, err
	}
	if !a.in.Done() {
		return false, nil
	}
	a.out.ReportUsage(a.in.Usage()) // with the cache writes the chunks leave out
	return a.out.Finish(translate.Emit(emit))
}
func (a *anthropicToResponses) usage() Usage { return fromTranslate(a.in.Usage()) }
