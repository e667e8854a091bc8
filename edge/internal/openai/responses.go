package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Responses serves POST /v1/responses: OpenAI's Responses API on the chat
// path. Errors are in OpenAI's shape; a stream that fails after its first
// event ends with a response.failed event, never a clean end.
type Responses struct {
	Router corev1.RouterClient
	// Upstream records time core spent waiting upstream.
	Upstream func(r *http.Request, us int64)
	// KeepAliveEvery overrides the package's KeepAliveEvery when positive.
	KeepAliveEvery time.Duration
}

func (h *Responses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := readJSON(w, r)
	if !ok {
		return
	}
	streamed, p := checkResponses(body)
	if p != nil {
		p.Write(w)
		return
	}
	serveChat(w, r, h.Router, h.Upstream, h.KeepAliveEvery, chatDialect{
		whole: !streamed,
		req: &corev1.ChatCompletionsRequest{
			Body: body, Dialect: corev1.ChatDialect_CHAT_DIALECT_RESPONSES, Headers: dialectHeaders(r, sessionHeaders)},
		fail:   func(w http.ResponseWriter, err error) { FromError(err).Write(w) },
		events: responsesEvents(),
	})
}

// responsesEvents ends a Responses stream: response.completed was the last
// event already; a failure is response.failed naming the response the
// stream started, with the next sequence number. What the failure needs is
// read from the events only when it comes: each event is not decoded as
// it passes, only the last one that carries a sequence number is kept, and
// the events that start a response are read for its id.
func responsesEvents() dialectEvents {
	var id, model string
	var createdAt int64
	var last []byte // the data of the last event with a sequence number
	return dialectEvents{
		seen: func(e event) {
			if bytes.Contains(e.data, []byte(`"sequence_number"`)) {
				last = append(last[:0], e.data...)
			}
			switch e.name {
			case "response.created", "response.in_progress", "response.queued":
			default:
				if id != "" || !bytes.Contains(e.data, []byte(`"response"`)) {
					return
				}
			}
			var ev struct {
				Response *struct {
					ID        string `json:"id"`
					Model     string `json:"model"`
					CreatedAt int64  `json:"created_at"`
				} `json:"response"`
			}
			if json.Unmarshal(e.data, &ev) == nil && ev.Response != nil && ev.Response.ID != "" {
				id, model, createdAt = ev.Response.ID, ev.Response.Model, ev.Response.CreatedAt
			}
		},
		failure: func(err error) []byte {
			var seq int64
			var ev struct {
				Seq *int64 `json:"sequence_number"`
			}
			if json.Unmarshal(last, &ev) == nil && ev.Seq != nil {
				seq = *ev.Seq + 1
			}
			p := FromError(err)
			msg, code := p.Body.Error.Message, ""
			if p.Body.Error.Code != nil {
				code = *p.Body.Error.Code
			}
			var upstream ErrorBody
			if p.Raw != nil && json.Unmarshal(p.Raw, &upstream) == nil && upstream.Error.Message != "" {
				// The upstream's own error (a response.failed it sent): its
				// code is what the client acts on.
				msg, code = upstream.Error.Message, ""
				if upstream.Error.Code != nil {
					code = *upstream.Error.Code
				}
			}
			b, _ := json.Marshal(map[string]any{
				"type": "response.failed", "sequence_number": seq,
				"response": map[string]any{
					"id": id, "object": "response", "created_at": createdAt, "status": "failed", "model": model,
					"output": []any{}, "error": map[string]string{"code": code, "message": msg},
					"incomplete_details": nil, "usage": nil,
				},
			})
			return writeEvent(event{"response.failed", b})
		},
	}
}

// GetResponse serves GET /v1/responses/{id}: a response stored with store.
type GetResponse struct {
	Router corev1.RouterClient
}

func (h *GetResponse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, id := Outgoing(r)
	w.Header().Set("X-Request-Id", id)
	resp, err := h.Router.GetResponse(ctx, &corev1.GetResponseRequest{Id: r.PathValue("id")})
	if err != nil {
		FromError(err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resp.GetBody())
}
