// Package chat serves /v1/chat/completions: it sends the client's body to
// the model's upstream (translated when the upstream speaks Anthropic
// Messages), relays a streamed answer event by event, falls back to another
// connection only until the first event reached the client, and ends a
// stream that breaks after that with an error, never a clean close.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Default timeouts of a stream.
const (
	// DefaultStallTimeout ends a stream whose upstream went silent.
	DefaultStallTimeout = 60 * time.Second
	// maxBody caps an upstream's non-streamed answer.
	maxBody = 64 << 20
	// maxEvent caps one streamed event.
	maxEvent = 8 << 20
)

// Sink receives the answer. Start is called once, before the first chunk
// or the completion, with the time spent waiting on upstreams so far.
type Sink interface {
	Start(upstream time.Duration) error
	Chunk(data []byte) error
	Completion(data []byte) error
}

// Request is a chat request.
type Request struct {
	MachineID string
	Body      []byte
	// Caveman returns the terse-output level for a connection ("" for off).
	Caveman func(c *busv1.Connection) string
}

// Usage is what the answering upstream reported.
type Usage struct {
	PromptTokens, CompletionTokens, TotalTokens, CachedTokens, ReasoningTokens int64
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

// StreamError ends a stream that already started.
type StreamError struct {
	// Code is stream_interrupted, stream_stalled, stream_malformed or
	// upstream_error.
	Code    string
	Message string
}

func (e *StreamError) Error() string { return e.Message }

// Options tune the service.
type Options struct {
	// StallTimeout ends a started stream whose upstream sends nothing for
	// this long.
	StallTimeout time.Duration
	// FirstEventTimeout is how long a stream may take to send its first
	// event; past it the next connection is tried.
	FirstEventTimeout time.Duration
}

// Service answers chat requests.
type Service struct {
	d    *dispatch.Dispatcher
	opts Options
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
	return spec.Format == provider.FormatOpenAI || spec.Format == provider.FormatAnthropic
}

// parsed is what the gateway reads of a chat body; the rest passes through.
type parsed struct {
	fields       map[string]json.RawMessage
	model        string
	stream       bool
	includeUsage bool
}

func parse(body []byte) (parsed, error) {
	var p parsed
	if err := json.Unmarshal(body, &p.fields); err != nil || p.fields == nil {
		return p, &RequestError{Code: "invalid_json", Message: "the request body is not a JSON object"}
	}
	raw, ok := p.fields["model"]
	if !ok || string(raw) == "null" {
		return p, &RequestError{Param: "model", Code: "missing_required_parameter", Message: "you must provide a model parameter"}
	}
	if json.Unmarshal(raw, &p.model) != nil || p.model == "" {
		return p, &RequestError{Param: "model", Code: "invalid_type", Message: "'model' must be a non-empty string"}
	}
	msgs, ok := p.fields["messages"]
	if !ok || string(msgs) == "null" {
		return p, &RequestError{Param: "messages", Code: "missing_required_parameter", Message: "you must provide a messages parameter"}
	}
	var list []json.RawMessage
	if json.Unmarshal(msgs, &list) != nil {
		return p, &RequestError{Param: "messages", Code: "invalid_type", Message: "'messages' must be an array"}
	}
	if len(list) == 0 {
		return p, &RequestError{Param: "messages", Code: "invalid_value", Message: "'messages' must not be empty"}
	}
	if s, ok := p.fields["stream"]; ok && string(s) != "null" {
		if json.Unmarshal(s, &p.stream) != nil {
			return p, &RequestError{Param: "stream", Code: "invalid_type", Message: "'stream' must be a boolean"}
		}
	}
	if so, ok := p.fields["stream_options"]; ok && string(so) != "null" {
		var opts struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if json.Unmarshal(so, &opts) != nil {
			return p, &RequestError{Param: "stream_options", Code: "invalid_type", Message: "'stream_options' must be an object"}
		}
		p.includeUsage = opts.IncludeUsage
	}
	return p, nil
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
	p, err := parse(req.Body)
	if err != nil {
		return Result{}, dispatch.Result{}, err
	}
	start := time.Now()
	var out Result
	started := false
	begin := func() error {
		if started {
			return nil
		}
		started = true
		out.Upstream = time.Since(start)
		return sink.Start(out.Upstream)
	}
	res, err := s.d.Do(ctx, dispatch.Request{MachineID: req.MachineID, Model: p.model, Supports: Supports},
		func(ctx context.Context, t routing.Target, c *dispatch.Conn) error {
			level := ""
			if req.Caveman != nil {
				level = req.Caveman(c.Connection)
			}
			a := attempt{svc: s, p: p, t: t, c: c, sink: sink, begin: begin, level: level}
			u, err := a.run(ctx)
			if err == nil {
				out.Usage = u
			} else if a.sent {
				out.Usage = a.delivered.bill(u)
			}
			return err
		})
	return out, res, err
}

var errFirstEvent = errors.New("upstream sent no event in time")
var errStalled = errors.New("upstream stream stalled")
