package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Messages serves POST /v1/messages: Anthropic's Messages API on the chat
// path. Every error on the route is in Anthropic's shape
// ({"type":"error","error":{"type","message"}}); a stream that fails after
// its first event ends with Anthropic's in-band `event: error`.
type Messages struct {
	Router corev1.RouterClient
	// Upstream records time core spent waiting upstream.
	Upstream func(r *http.Request, us int64)
	// KeepAliveEvery overrides the package's KeepAliveEvery when positive.
	KeepAliveEvery time.Duration
}

// anthropicHeaders are the client headers handed to core for an
// Anthropic-shaped upstream.
var anthropicHeaders = canonicalNames("anthropic-version", "anthropic-beta", "x-session-id")

// sessionHeaders name a conversation, for session affinity: ours, and
// Codex's.
var sessionHeaders = canonicalNames("x-session-id", "session_id")

// dialectHeaders are the named client headers present, or nil (an empty
// map reaches core as nil anyway, over the wire as in process).
func dialectHeaders(r *http.Request, names []canonicalName) map[string]string {
	var out map[string]string
	for _, n := range names {
		if v := headerValue(r.Header, n.canonical); v != "" && len(v) <= 1024 {
			if out == nil {
				out = make(map[string]string, len(names))
			}
			out[n.name] = v
		}
	}
	return out
}

// canonicalName is a header name as core reads it (lower case) and as
// http.Header keys it (canonical), computed once.
type canonicalName struct{ name, canonical string }

func canonicalNames(names ...string) []canonicalName {
	out := make([]canonicalName, len(names))
	for i, n := range names {
		out[i] = canonicalName{name: n, canonical: http.CanonicalHeaderKey(n)}
	}
	return out
}

func (h *Messages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, streamed, ok := readAnthropicBody(w, r)
	if !ok {
		return
	}
	serveChat(w, r, h.Router, h.Upstream, h.KeepAliveEvery, chatDialect{
		whole: !streamed,
		req: &corev1.ChatCompletionsRequest{
			Body: body, Dialect: corev1.ChatDialect_CHAT_DIALECT_MESSAGES, Headers: dialectHeaders(r, anthropicHeaders)},
		idHeaders: []string{"request-id"},
		fail:      func(w http.ResponseWriter, err error) { AnthropicError(err).Write(w) },
		events:    messagesEvents,
	})
}

// CountTokens serves POST /v1/messages/count_tokens.
type CountTokens struct {
	Router corev1.RouterClient
}

func (h *CountTokens) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _, ok := readAnthropicBody(w, r)
	if !ok {
		return
	}
	ctx, id := Outgoing(r)
	w.Header().Set("X-Request-Id", id)
	w.Header().Set("request-id", id)
	resp, err := h.Router.CountTokens(ctx, &corev1.CountTokensRequest{Body: body, Headers: dialectHeaders(r, anthropicHeaders)})
	if err != nil {
		AnthropicError(err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resp.GetBody())
}

// messagesEvents ends Anthropic streams: message_stop was the last event
// already; a failure is `event: error`.
var messagesEvents = dialectEvents{
	failure: func(err error) []byte {
		b, _ := json.Marshal(AnthropicError(err).body())
		return writeEvent(event{"error", b})
	},
}

func readAnthropicBody(w http.ResponseWriter, r *http.Request) (body []byte, streamed, ok bool) {
	body, ok = readJSON(w, r) // its problems are written in Anthropic's shape here
	if !ok {
		return nil, false, false
	}
	streamed, p := checkMessages(body)
	if p != nil {
		p.WriteFor(w, r)
		return nil, false, false
	}
	return body, streamed, true
}

// AnthropicProblem is an error in Anthropic's shape.
type AnthropicProblem struct {
	Status     int
	Type       string
	Message    string
	RetryAfter time.Duration
	// Raw is an upstream's Anthropic-shaped error body, passed through.
	Raw []byte
}

type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (p AnthropicProblem) body() any {
	if p.Raw != nil {
		return json.RawMessage(p.Raw)
	}
	var b anthropicErrorBody
	b.Type = "error"
	b.Error.Type, b.Error.Message = p.Type, p.Message
	return b
}

// Write sends the problem.
func (p AnthropicProblem) Write(w http.ResponseWriter) {
	writeProblemHeader(w, p.Status, p.RetryAfter)
	b, _ := marshalNoEscape(p.body())
	_, _ = w.Write(b)
}

// IsMessagesPath reports the Anthropic Messages routes, whose errors are in
// Anthropic's shape.
func IsMessagesPath(p string) bool {
	return p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/")
}

// WriteFor writes p in the shape of r's route: Anthropic's on the Messages
// routes, OpenAI's elsewhere. The edge's guards answer with it, so a
// request they refuse gets the same shape as one its handler refuses.
func (p Problem) WriteFor(w http.ResponseWriter, r *http.Request) {
	if r != nil && IsMessagesPath(r.URL.Path) {
		msg := p.Body.Error.Message
		if msg == "" {
			msg = http.StatusText(p.Status)
		}
		AnthropicProblem{Status: p.Status, Type: contract.AnthropicErrorType(p.Status), Message: msg, RetryAfter: p.RetryAfter}.Write(w)
		return
	}
	p.Write(w)
}

// AnthropicError maps an error of a gRPC call to core to Anthropic's shape:
// the status as FromError finds it, an upstream's Anthropic-shaped body
// passed through, any other message kept.
func AnthropicError(err error) AnthropicProblem {
	p := FromError(err)
	out := AnthropicProblem{Status: p.Status, Type: contract.AnthropicErrorType(p.Status), Message: p.Body.Error.Message, RetryAfter: p.RetryAfter}
	var upstream string
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			upstream = info.GetMetadata()["upstream_body"]
		}
	}
	if upstream != "" {
		var a anthropicErrorBody
		if json.Unmarshal([]byte(upstream), &a) == nil && a.Type == "error" && a.Error.Type != "" {
			out.Raw = []byte(strings.TrimSpace(upstream))
			return out
		}
		// Only the message is read: a server's code may be a number
		// (llama.cpp, vLLM), which ErrorBody's does not take.
		var o struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(upstream), &o) == nil && o.Error.Message != "" {
			out.Message = o.Error.Message
		}
	}
	return out
}
