package chat

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/translate"
	"github.com/switchboardhq/switchboard/internal/upstream"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// eventError is an error an upstream reported inside its stream (an
// Anthropic error event, a Responses error or response.failed, a chunk
// with an error member). body is what it said, in the error shape of the
// client's route (an Anthropic error event's data, or an OpenAI error
// object), so that a pass-through hands the client the upstream's own type,
// code and message: agents act on them (Codex compacts on
// context_length_exceeded, Claude Code retries on overloaded_error). status
// is the HTTP status the same error would have come with as an answer.
type eventError struct {
	body   []byte
	status int
	// inAnthropicShape marks an OpenAI error object for a /v1/messages
	// client (an OpenAI-shaped upstream's): once the stream started it goes
	// as Anthropic's error event. Before, it stays as the upstream said it,
	// as that upstream's error answers do (errorBody): the engine reads its
	// code, and the edge renders it in Anthropic's shape by its status.
	inAnthropicShape bool
}

func (e *eventError) Error() string        { return errUpstreamEvent.Error() }
func (e *eventError) Is(target error) bool { return target == errUpstreamEvent }

// maxEventError bounds the error body kept of an upstream's event.
const maxEventError = 16 << 10

// anthropicEventError is the error of an Anthropic error event (its data
// is passed on as it is). An error event that holds an OpenAI error object
// with no type (some compatible upstreams send one) is that object's error
// (upstream.OpenAIError), in Anthropic's shape for a /v1/messages client.
func anthropicEventError(data []byte) error {
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	var e struct {
		Type string `json:"type"`
	}
	if len(data) > maxEventError || json.Unmarshal(data, &ev) != nil || json.Unmarshal(ev.Error, &e) != nil {
		return errUpstreamEvent
	}
	if e.Type == "" {
		body, status, ok := upstream.OpenAIError(ev.Error)
		if !ok {
			return errUpstreamEvent
		}
		return (&eventError{body: body, status: status}).anthropicShaped()
	}
	status := (&translate.AnthropicError{Type: e.Type}).Status()
	return &eventError{body: append([]byte(nil), data...), status: status}
}

// responsesEventError is the error of a Responses error event (code and
// message at the top) or response.failed (in response.error), as an
// OpenAI error object.
func responsesEventError(name string, data []byte) error {
	var ev struct {
		Code     *string `json:"code"`
		Message  string  `json:"message"`
		Param    *string `json:"param"`
		Response struct {
			Error struct {
				Code    *string `json:"code"`
				Message string  `json:"message"`
			} `json:"error"`
		} `json:"response"`
	}
	if len(data) > maxEventError || json.Unmarshal(data, &ev) != nil {
		return errUpstreamEvent
	}
	code, msg := ev.Code, ev.Message
	if name == "response.failed" {
		code, msg, ev.Param = ev.Response.Error.Code, ev.Response.Error.Message, nil
	}
	if msg == "" {
		return errUpstreamEvent
	}
	status := upstream.CodeStatus(code)
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": ev.Param}})
	return &eventError{body: body, status: status}
}

// chatEventError is the error of a chunk with an error member, as the
// OpenAI error object it holds, or of an error object in a chunk's place
// ({"object":"error","message",...,"code":400}, as vLLM sends it).
func chatEventError(data []byte) error {
	var ev struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
	}
	if len(data) > maxEventError || json.Unmarshal(data, &ev) != nil {
		return errUpstreamEvent
	}
	if ev.Object == "error" && len(ev.Error) == 0 {
		ev.Error = data
	}
	body, status, ok := upstream.OpenAIError(ev.Error)
	if !ok {
		return errUpstreamEvent
	}
	return &eventError{body: body, status: status}
}

// failEvent ends a stream on an error its upstream reported: after the
// first event the client gets the upstream's own error in-band; before it,
// the attempt failed with the status and body the error would have come
// with as an answer, so the engine cools and falls over, or hands the
// client that error, as it does for answers. After the first event the
// engine still reads that status and body
// (credential.StreamError.Upstream), to cool the connection as for that
// answer, or not at all.
func (a *attempt) failEvent(err error) error {
	var ev *eventError
	if !errors.As(err, &ev) {
		return a.fail("upstream_error", err.Error())
	}
	// An upstream's error may echo the credential it was sent, as its error
	// answers may: scrubbed alike.
	body := a.c.Scrub(ev.body)
	// One line: the chat route frames it as one data line.
	var compact bytes.Buffer
	if json.Compact(&compact, body) == nil {
		body = compact.Bytes()
	}
	up := &credential.UpstreamError{Status: ev.status, Body: body}
	if a.sent {
		if ev.inAnthropicShape {
			body = anthropicErrorEvent(body, ev.status)
		}
		return credential.Committed(&credential.StreamError{Code: "upstream_error", Message: err.Error(), Body: body, Upstream: up})
	}
	return up
}

// The translated routes' wrappers look for an upstream's error event
// before their translator sees it (chunkError, anthropicError,
// responsesError), so that the error keeps its status before the first
// event and its type and code after it, in the client's dialect, as on the
// pass-through routes. Each returns nil for an event that reports no error
// it can read: the translator then judges the event.

// quotedError is in the data of every event that reports an error (a
// member or a type named "error"): a cheap test before a closer look.
var quotedError = []byte(`"error"`)

// chunkError is the error a chat.completion.chunk reports (chatEventError's).
func chunkError(data []byte) *eventError {
	if !bytes.Contains(data, quotedError) {
		return nil
	}
	ev, _ := chatEventError(data).(*eventError)
	return ev
}

// anthropicError is the error an Anthropic error event reports
// (anthropicEventError's, in Anthropic's shape).
func anthropicError(name string, data []byte) *eventError {
	if name == "" && bytes.Contains(data, quotedError) {
		name = anthropicEventName(data)
	}
	if name != "error" {
		return nil
	}
	ev, _ := anthropicEventError(data).(*eventError)
	return ev
}

// responsesError is the error a Responses error or response.failed event
// reports (responsesEventError's).
func responsesError(name string, data []byte) *eventError {
	if name == "" && bytes.Contains(data, quotedError) {
		name = eventType(data)
	}
	if name != "error" && name != "response.failed" {
		return nil
	}
	ev, _ := responsesEventError(name, data).(*eventError)
	return ev
}

// eventType is the type an unnamed event's data gives itself.
func eventType(data []byte) string {
	var ev struct {
		Type string `json:"type"`
	}
	if len(data) > maxEventError || json.Unmarshal(data, &ev) != nil {
		return ""
	}
	return ev.Type
}

// anthropicEventName is the name an unnamed Anthropic event's data gives
// itself: its type, or "error" for an error member with no type (an error
// in OpenAI's shape, as some compatible upstreams send one without an
// event line).
func anthropicEventName(data []byte) string {
	if t := eventType(data); t != "" || len(data) > maxEventError {
		return t
	}
	if e := member(data, "error"); e != nil && !isNull(e) {
		return "error"
	}
	return ""
}

// openAIShaped is e, an Anthropic error event's, as an OpenAI error object
// for the chat and Responses routes, as those routes' error answers are
// (translate.AnthropicErrorToOpenAI: the type follows the status, the code
// is Anthropic's type, so a client still reads overloaded_error).
func (e *eventError) openAIShaped() *eventError {
	if e.inAnthropicShape { // an OpenAI error object already
		return &eventError{body: e.body, status: e.status}
	}
	return &eventError{body: translate.AnthropicErrorToOpenAI(e.body), status: e.status}
}

// anthropicShaped is e, an OpenAI error object, for a /v1/messages client
// (see inAnthropicShape).
func (e *eventError) anthropicShaped() *eventError {
	return &eventError{body: e.body, status: e.status, inAnthropicShape: true}
}

// anthropicErrorEvent is an OpenAI error body as the data of Anthropic's
// error event: the Anthropic type its status stands for (rate_limit_error
// for a rate_limit_exceeded, invalid_request_error for a
// context_length_exceeded), its message kept. A body with no message stays
// as it is.
func anthropicErrorEvent(body []byte, status int) []byte {
	var in struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &in) != nil || in.Error.Message == "" {
		return body
	}
	var out struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	out.Type, out.Error.Type, out.Error.Message = "error", contract.AnthropicErrorType(status), in.Error.Message
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the message as the upstream wrote it
	if enc.Encode(out) != nil {
		return body
	}
	return bytes.TrimSpace(b.Bytes())
}
