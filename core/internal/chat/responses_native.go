package chat

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/translate"
	"github.com/switchboardhq/switchboard/internal/jsonscan"
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

func (responsesNative) whole(in inbound, raw []byte, _ string) ([]byte, Usage, error) {
	object, u, ok := readWholeResponse(raw)
	if !ok || object != "response" {
		return nil, Usage{}, badUpstream("upstream returned an invalid response")
	}
	if in.previous != nil {
		raw = jsonscan.SetMember(raw, "previous_response_id", in.previous)
	}
	return raw, u.usage(), nil
}

// wholeResponseNames are the members of a whole response walk looks for.
var wholeResponseNames = []string{"object", "usage"}

// readWholeResponse reads a whole Responses answer's object and usage as
// json.Unmarshal into those two fields would (ok false: it would fail), in
// one walk that decodes only the usage; a body the walk cannot be sure of
// (odd or repeated names, an object member that is not a plain string)
// goes to json.Unmarshal whole.
func readWholeResponse(raw []byte) (object string, u *responsesUsage, ok bool) {
	w := walk{names: wholeResponseNames}
	if !w.run(raw) {
		return "", nil, false
	}
	if w.plain() {
		if obj, plain := plainString(w.member(0)); plain {
			if v := w.member(1); v != nil && json.Unmarshal(v, &u) != nil {
				return "", nil, false
			}
			return string(obj), u, true
		}
	}
	var r struct {
		Object string          `json:"object"`
		Usage  *responsesUsage `json:"usage"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return "", nil, false
	}
	return r.Object, r.Usage, true
}

func (responsesNative) events(in inbound, _ string) eventTranslator {
	return &responsesEvents{previous: in.previous}
}

// responsesEvents relays Responses events as they are, reading usage from
// the final response.
type responsesEvents struct {
	u    Usage
	done bool
	// previous names the response the request continues, written into
	// the response its lifecycle events carry (see inbound.previous).
	previous json.RawMessage
	// last, lastName and chars are the event last relayed and its
	// delivered text, counted on the walk that read it (see counted).
	last     []byte
	lastName string
	chars    int64
}

// responsesEvent is what the gateway reads of a Responses event.
type responsesEvent struct {
	Type     string            `json:"type"`
	Response responsesResponse `json:"response"`
}

// responsesResponse is what the gateway reads of a response: its usage.
type responsesResponse *struct {
	Usage *responsesUsage `json:"usage"`
}

// decodeResponse reads a response object (already walked: valid JSON) as
// json.Unmarshal into a responsesResponse would, decoding only its usage
// member when it has one (a response's output is most of its bytes); an
// object with several members named usage, or a value that is not an
// object, goes to json.Unmarshal whole.
func decodeResponse(raw []byte) (responsesResponse, bool) {
	var usage []byte
	n := 0
	isObject := jsonscan.Members(raw, func(k, v []byte) bool {
		if bytes.EqualFold(k, []byte("usage")) {
			usage, n = v, n+1
		}
		return true
	})
	if !isObject || n > 1 {
		var resp responsesResponse
		return resp, json.Unmarshal(raw, &resp) == nil
	}
	resp := responsesResponse(new(struct {
		Usage *responsesUsage `json:"usage"`
	}))
	if n == 1 && json.Unmarshal(usage, &resp.Usage) != nil {
		return nil, false
	}
	return resp, true
}

// responsesNames are the members of a Responses event walk looks for.
var responsesNames = []string{"type", "response"}

// readResponsesEvent reads a Responses event (ok false: malformed; its
// type only when name is empty) and its delivered text (as an event of
// that name, or -1 when name is not yet known). The event is walked once
// (walk.event); only a response (of its first and last events) is decoded,
// and encoding/json decodes the whole event when the walk cannot tell what
// it would read.
func readResponsesEvent(name string, data []byte) (responsesEvent, bool, int64) {
	return readEvent(responsesNames, name, data, func(ev *responsesEvent, typ, response, _ []byte) bool {
		ev.Type = string(typ)
		if response == nil || isNull(response) {
			return true
		}
		var ok bool
		ev.Response, ok = decodeResponse(response)
		return ok
	})
}

func (r *responsesEvents) event(name string, data []byte, emit emitFunc) (bool, error) {
	ev, ok, chars := readResponsesEvent(name, data)
	if !ok {
		return false, errMalformedEvent
	}
	if name == "" {
		name = ev.Type
	}
	switch name {
	case "error", "response.failed":
		return false, responsesEventError(name, data)
	case "response.completed", "response.incomplete":
		r.done = true
		if ev.Response != nil {
			r.u = ev.Response.Usage.usage()
		}
	}
	if r.previous != nil && lifecycle[name] {
		data = namePrevious(data, r.previous)
	}
	r.last, r.lastName, r.chars = data, name, chars
	if err := emit(name, data); err != nil {
		return false, err
	}
	return r.done, nil
}

func (r *responsesEvents) counted(event string, data []byte) (int64, bool) {
	return r.chars, r.chars >= 0 && event == r.lastName && sameBytes(data, r.last)
}

func (r *responsesEvents) finish(emitFunc) (bool, error) { return r.done, nil }
func (r *responsesEvents) usage() Usage                  { return r.u }

// lifecycle are the Responses events that carry the response itself.
var lifecycle = map[string]bool{"response.created": true, "response.queued": true, "response.in_progress": true,
	"response.completed": true, "response.incomplete": true}

// namePrevious writes previous into the response an event carries.
func namePrevious(data []byte, previous json.RawMessage) []byte {
	response := jsonscan.Member(data, "response")
	if len(response) == 0 || response[0] != '{' {
		return data
	}
	return jsonscan.SetMember(data, "response", jsonscan.SetMember(response, "previous_response_id", previous))
}
