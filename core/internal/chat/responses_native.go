package chat

import (
	"encoding/json"
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
)

// responsesNative is OpenAI Responses to an upstream that speaks it (openai,
// codex): a pass-through, model swapped.
type responsesNative struct{ toResponses }

func (responsesNative) header(http.Header, inbound) {}
func (responsesNative) errorBody(raw []byte) []byte { return raw }

func (responsesNative) request(in inbound, model string) ([]byte, error) {
	m, _ := json.Marshal(model)
	return in.withFields(map[string]json.RawMessage{"model": m})
}

// responsesUsage is the Responses API's usage object.
type responsesUsage translate.ResponsesUsage

func (u *responsesUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	return fromTranslate(translate.OpenAIUsage(u.InputTokens, u.OutputTokens, u.TotalTokens,
		u.InputTokensDetails.CachedTokens, u.OutputTokensDetails.ReasoningTokens))
}

func (responsesNative) whole(raw []byte, _ string) ([]byte, Usage, error) {
	var r struct {
		Object string          `json:"object"`
		Usage  *responsesUsage `json:"usage"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Object != "response" {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	return raw, r.Usage.usage(), nil
}

func (responsesNative) events(inbound, string) eventTranslator { return &responsesEvents{} }

// responsesEvents relays Responses events as they are, reading usage from
// the final response.
type responsesEvents struct {
	u    Usage
	done bool
}

func (r *responsesEvents) event(name string, data []byte, emit emitFunc) (bool, error) {
	var ev struct {
		Type     string `json:"type"`
		Response *struct {
			Usage *responsesUsage `json:"usage"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false, errMalformedEvent
	}
	if name == "" {
		name = ev.Type
	}
	switch name {
	case "error", "response.failed":
		return false, errUpstreamEvent
	case "response.completed", "response.incomplete":
		r.done = true
		if ev.Response != nil {
			r.u = ev.Response.Usage.usage()
		}
	}
	if err := emit(name, data); err != nil {
		return false, err
	}
	return r.done, nil
}

func (r *responsesEvents) finish(emitFunc) (bool, error) { return r.done, nil }
func (r *responsesEvents) usage() Usage                  { return r.u }
