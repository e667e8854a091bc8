// Package chat serves the gateway's three chat dialects (OpenAI Chat
// Completions, Anthropic Messages, OpenAI Responses) on one path: it sends
// the client's body to the model's upstream through the translator of the
// (dialect, upstream format) pair (a pass-through when the two match),
// relays a streamed answer event by event, falls back to another connection
// only until the first event reached the client, and ends a stream that
// breaks after that with an error, never a clean close.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Default timeouts of a stream.
const (
	// DefaultStallTimeout ends a stream whose upstream went silent.
	DefaultStallTimeout = upstream.DefaultStallTimeout
	// maxBody caps an upstream's non-streamed answer.
	maxBody = 64 << 20
	// maxEvent caps one streamed event.
	maxEvent = 8 << 20
)

// Sink receives the answer. Start is called once, before the first chunk
// or the completion, with the time spent waiting on upstreams so far. A
// chunk is one event of the client's dialect: event is its SSE name
// (empty for Chat Completions, whose events have none).
type Sink interface {
	Start(upstream time.Duration) error
	Chunk(event string, data []byte) error
	Completion(data []byte) error
}

// Event is one event of a streamed answer: its server-sent event name
// (empty for Chat Completions) and its data.
type Event struct {
	Name string
	Data []byte
}

// BatchSink is a Sink that can carry several events of a stream in one
// message. The events the upstream sent together (already whole in the
// reader's buffer) are then handed over together, and the edge writes
// them to its client in one go, as a byte-copying proxy would, instead of
// one write and one flush each.
//
// Events must not keep the events' data once it returns: the buffer is
// reused.
type BatchSink interface {
	Sink
	Events(evs []Event) error
}

// Request is a chat request.
type Request struct {
	MachineID string
	// Dialect is the shape of Body and of the answer.
	Dialect Dialect
	Body    []byte
	// Header holds the client headers a translator may forward upstream
	// (lower-case names: anthropic-version, anthropic-beta).
	Header map[string]string
	// Caveman returns the terse-output level for a connection ("" for off).
	Caveman func(c *busv1.Connection) string
	// Whole: the caller takes a whole answer only; a streaming request is
	// refused before any upstream is called.
	Whole bool
}

// Usage is what the answering upstream reported. PromptTokens counts every
// input token; CachedTokens (cache reads) and CacheWriteTokens are subsets.
type Usage struct {
	PromptTokens, CompletionTokens, TotalTokens, CachedTokens, ReasoningTokens, CacheWriteTokens int64
	// Partial: the stream failed or was abandoned after content reached the
	// client; the usage is what was delivered. Estimated: the upstream
	// reported none, the tokens are the gateway's count (delivered.go).
	Partial, Estimated bool
}

// Result describes the answer.
type Result struct {
	Usage Usage
	// Upstream is the time spent waiting on upstreams before the answer
	// started.
	Upstream time.Duration
}

// RequestError is a request the gateway refuses (a 400).
type RequestError struct {
	Param, Code, Message string
}

func (e *RequestError) Error() string { return e.Message }

// body is the error in OpenAI's shape.
func (e *RequestError) body() []byte {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": e.Message, "type": "invalid_request_error", "param": param, "code": e.Code,
	}})
	return b
}

// Options tune the service.
type Options struct {
	// StallTimeout ends a started stream whose upstream sends nothing for
	// this long.
	StallTimeout time.Duration
	// FirstEventTimeout is how long a stream may take to send its first
	// event; past it the next connection is tried.
	FirstEventTimeout time.Duration
	// Responses keeps stored Responses answers; nil stores nothing.
	Responses ResponseStore
	// Affinity keeps sessions on their connection; nil turns it off.
	Affinity AffinityStore
	// Log, when set, receives what fails after an answer was sent.
	Log *slog.Logger
}

// Service answers chat requests.
type Service struct {
	d         *dispatch.Dispatcher
	opts      Options
	refreshed refreshes
	// storeWait bounds the storing of an answer (zero: storeTimeout).
	storeWait time.Duration
	refusals  reasoningRefusals
}

// New returns a Service.
func New(d *dispatch.Dispatcher, opts Options) *Service {
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.FirstEventTimeout <= 0 {
		opts.FirstEventTimeout = 2 * time.Minute
	}
	return &Service{d: d, opts: opts}
}

// Supports reports whether a provider answers chat.
func Supports(spec provider.Spec) bool {
	return spec.Format == provider.FormatOpenAI || spec.Format == provider.FormatAnthropic || spec.Format == provider.FormatResponses
}

// Model returns the model a body names, for routing and errors.
func Model(body []byte) string {
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &m)
	return m.Model
}

// Complete answers the request into sink.
func (s *Service) Complete(ctx context.Context, req Request, sink Sink) (Result, dispatch.Result, error) {
	in, err := parse(req.Dialect, req.Body)
	if err != nil {
		return Result{}, dispatch.Result{}, err
	}
	if req.Whole && in.stream {
		return Result{}, dispatch.Result{}, &RequestError{Param: "stream", Code: contract.ReasonStreamedRequest, Message: "this call answers requests that are not streamed; stream with ChatCompletions"}
	}
	in.header = req.Header
	if in.dialect == DialectResponses {
		if err := s.continueFrom(ctx, req.MachineID, &in); err != nil {
			return Result{}, dispatch.Result{}, err
		}
		// The final response is looked for in the answer only when it is
		// to be stored.
		if s.opts.Responses != nil && in.storing() {
			stored := in
			kept := &capture{Sink: sink, keep: func(response json.RawMessage) {
				if err := s.store(req.MachineID, stored, response); err != nil {
					s.log(ctx, "storing a response failed", err)
				}
			}}
			if b, ok := sink.(BatchSink); ok {
				sink = captureBatch{capture: kept, batch: b}
			} else {
				sink = kept
			}
		}
	}
	start := time.Now()
	affKey, prefer := s.affinity(ctx, req.MachineID, in)
	cp := &completion{s: s, in: in, sink: sink, caveman: req.Caveman, affKey: affKey, prefer: prefer, start: start}
	res, err := s.d.Do(ctx, dispatch.Request{MachineID: req.MachineID, Model: in.model, Supports: Supports, Prefer: prefer}, cp.call)
	out := cp.out
	if err == nil && res.Conn != nil && res.Conn.Connection.GetId() == prefer {
		s.keepAlive(ctx, affKey, prefer) // keeps an active session from expiring
	}
	return out, res, err
}

// completion is what the attempts of one request share: the answer starts
// once, whichever connection gives it.
type completion struct {
	s       *Service
	in      inbound
	sink    Sink
	caveman func(c *busv1.Connection) string
	// affKey and prefer are the session's affinity key and connection.
	affKey, prefer string
	start          time.Time
	started        bool
	out            Result
}

// begin starts the answer on the sink (once) for the connection connID.
func (cp *completion) begin(ctx context.Context, connID string) error {
	if cp.affKey != "" && connID != cp.prefer {
		// A session that moves is recorded before the client sees the
		// answer, so its next request finds the new connection.
		cp.s.remember(ctx, cp.affKey, connID)
	}
	if cp.started {
		return nil
	}
	cp.started = true
	cp.out.Upstream = time.Since(cp.start)
	return cp.sink.Start(cp.out.Upstream)
}

// call is one attempt, with one connection.
func (cp *completion) call(ctx context.Context, t routing.Target, c *dispatch.Conn) error {
	level := ""
	if cp.caveman != nil {
		level = cp.caveman(c.Connection)
	}
	spec, key, withheld := t.Spec, "", false
	if spec.ReasoningBack && cp.in.dialect != DialectChat {
		// Only a translation sends reasoning back.
		key = refusalKey(c.Connection.GetId(), t.Model)
		withheld = cp.s.refusals.refuses(key, time.Now())
		spec.ReasoningBack = !withheld
	}
	a := attempt{svc: cp.s, in: cp.in, tr: pick(cp.in.dialect, spec, t.Model), t: t, c: c, sink: cp.sink, cp: cp, level: level,
		refusalKey: key, withheld: withheld}
	u, err := a.run(ctx)
	if err == nil {
		cp.out.Usage = u
	} else if a.sent {
		cp.out.Usage = a.delivered.bill(u)
	}
	cp.out.Usage = withPrompt(cp.in, cp.out.Usage)
	return err
}

func (s *Service) log(ctx context.Context, msg string, err error) {
	if s.opts.Log != nil {
		s.opts.Log.WarnContext(ctx, msg, "err", err)
	}
}

var errFirstEvent = errors.New("upstream sent no event in time")
