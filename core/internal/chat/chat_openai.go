package chat

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// chatOpenAI is Chat Completions to an OpenAI-shaped upstream: a
// pass-through (model swapped; usage asked for on streams, for metering).
type chatOpenAI struct{ toChat }

func (chatOpenAI) header(http.Header, inbound) {}
func (chatOpenAI) errorBody(raw []byte) []byte { return raw }
func (chatOpenAI) events(in inbound, _ string) eventTranslator {
	return &openAIChunks{includeUsage: in.includeUsage}
}

func (chatOpenAI) request(in inbound, model string) ([]byte, error) {
	m, _ := json.Marshal(model)
	set := map[string]json.RawMessage{"model": m}
	if in.stream {
		set["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	}
	return in.withFields(set)
}

func (chatOpenAI) whole(raw []byte, _ string) ([]byte, Usage, error) {
	if !json.Valid(raw) {
		return nil, Usage{}, badUpstream("upstream returned invalid JSON")
	}
	var body struct {
		Usage *usageJSON `json:"usage"`
	}
	_ = json.Unmarshal(raw, &body)
	return raw, body.Usage.usage(), nil
}

// openAIChunks relays chat.completion.chunk events as they are, reading
// their usage and finish reason; the usage-only chunk the gateway asked for
// is kept from a client that did not.
type openAIChunks struct {
	includeUsage bool
	finished     bool
	u            Usage
}

func (o *openAIChunks) event(_ string, data []byte, emit emitFunc) (bool, error) {
	if bytes.Equal(data, []byte("[DONE]")) {
		return true, nil
	}
	if !json.Valid(data) {
		return false, errMalformedEvent
	}
	c := inspect(data)
	if c.err {
		return false, errUpstreamEvent
	}
	if c.usage != nil {
		o.u = c.usage.usage()
		if c.usageOnly && !o.includeUsage {
			return false, nil // asked for the gateway's accounting, not the client's
		}
	}
	if c.finished {
		o.finished = true
	}
	return false, emit("", data)
}

func (o *openAIChunks) finish(emitFunc) (bool, error) { return o.finished, nil }
func (o *openAIChunks) usage() Usage                  { return o.u }

// chunkFacts are what the gateway needs from a chunk.
type chunkFacts struct {
	usage     *usageJSON
	usageOnly bool
	finished  bool
	err       bool
}

// inspect reads a chunk's usage, finish reason and error without decoding
// the common content chunk: only chunks that mention them are decoded.
func inspect(data []byte) chunkFacts {
	var f chunkFacts
	hasUsage := bytes.Contains(data, []byte(`"usage"`)) && !bytes.Contains(data, []byte(`"usage":null`))
	hasFinish := bytes.Contains(data, []byte(`"finish_reason"`)) && !bytes.Contains(data, []byte(`"finish_reason":null`))
	hasError := bytes.HasPrefix(bytes.TrimSpace(data), []byte(`{"error"`))
	if !hasUsage && !hasFinish && !hasError {
		return f
	}
	var c struct {
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *usageJSON      `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &c) != nil {
		return f
	}
	f.usage = c.Usage
	f.usageOnly = c.Usage != nil && len(c.Choices) == 0
	f.err = len(c.Error) > 0 && string(c.Error) != "null"
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			f.finished = true
		}
	}
	return f
}
