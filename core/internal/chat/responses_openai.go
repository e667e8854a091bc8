package chat

import (
	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// responsesOpenAI is OpenAI Responses to a Chat Completions upstream.
type responsesOpenAI struct{ toChatWith }

func (r responsesOpenAI) request(in inbound, model string) ([]byte, error) {
	body, err := translate.ResponsesToOpenAIRequest(in.body, model, r.opts)
	if err != nil {
		return nil, requestError(err, "input")
	}
	return body, nil
}

func (responsesOpenAI) whole(in inbound, raw []byte, model string) ([]byte, Usage, error) {
	out, u, err := in.echo.Response(raw, model)
	if err != nil {
		return nil, Usage{}, invalidCompletion(raw)
	}
	return out, fromTranslate(u), nil
}

func (responsesOpenAI) events(in inbound, model string) eventTranslator {
	return &chunksToResponses{tr: in.echo.Chunks(model)}
}

// chunksToResponses turns chat.completion.chunks into Responses events.
type chunksToResponses struct{ tr *translate.ChunkToResponses }

func (c *chunksToResponses) event(_ string, data []byte, emit emitFunc) (bool, error) {
	if translate.IsDone(data) {
		c.tr.Done()
		return true, nil
	}
	if ev := chunkError(data); ev != nil {
		return false, ev
	}
	return false, c.tr.Chunk(data, translate.Emit(emit))
}

func (c *chunksToResponses) finish(emit emitFunc) (bool, error) {
	return c.tr.Finish(translate.Emit(emit))
}
func (c *chunksToResponses) usage() Usage { return fromTranslate(c.tr.Usage()) }
