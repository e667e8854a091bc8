package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/caveman"
	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/core/internal/translate"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/sse"
)

// attempt is one upstream call with one connection.
type attempt struct {
	svc   *Service
	p     parsed
	t     routing.Target
	c     *dispatch.Conn
	sink  Sink
	begin func() error
	level string
	sent  bool // a chunk reached the sink: no fallback from here on
	// delivered counts what reached the client, billed if the stream ends
	// early.
	delivered delivered
}

func (a *attempt) anthropic() bool { return a.t.Spec.Format == provider.FormatAnthropic }

// body builds the upstream request body: the client's body with the upstream
// model, usage asked for on streams, translated for Anthropic, and the terse
// prompt injected last, in the target's shape.
func (a *attempt) body() ([]byte, error) {
	fields := make(map[string]json.RawMessage, len(a.p.fields)+1)
	for k, v := range a.p.fields {
		fields[k] = v
	}
	model, _ := json.Marshal(a.t.Model)
	fields["model"] = model
	if a.p.stream && !a.anthropic() {
		fields["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	if a.anthropic() {
		tr, err := translate.OpenAIToAnthropicRequest(body, a.t.Model)
		if err != nil {
			var re *translate.RequestError
			if errors.As(err, &re) {
				return nil, &RequestError{Param: re.Param, Code: "invalid_value", Message: re.Message}
			}
			return nil, &RequestError{Param: "messages", Code: "invalid_value", Message: err.Error()}
		}
		body = tr.Body
	}
	if a.level != "" {
		inject := caveman.InjectOpenAI
		if a.anthropic() {
			inject = caveman.InjectAnthropic
		}
		// A body the injector cannot read goes upstream as it is: the
		// upstream is the judge of the request's shape.
		if terse, err := inject(body, a.level); err == nil {
			return terse, nil
		}
	}
	return body, nil
}

func (a *attempt) run(ctx context.Context) (Usage, error) {
	body, err := a.body()
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			// The request's own fault, found in translation: a 400 that is
			// passed through like an upstream's, with no fallback.
			return Usage{}, &credential.UpstreamError{Status: http.StatusBadRequest, Body: re.body()}
		}
		return Usage{}, err
	}
	path := "/chat/completions"
	if a.anthropic() {
		path = "/messages"
	}
	// The stream's watchdog cancels the call when the upstream goes silent.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return Usage{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.p.stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	a.c.Authorize(req.Header)
	resp, err := a.c.Client.Do(req)
	if err != nil {
		return Usage{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		raw = a.c.Scrub(raw)
		if a.anthropic() {
			raw = translate.AnthropicErrorToOpenAI(raw)
		}
		return Usage{}, &credential.UpstreamError{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	}
	if !a.p.stream {
		return a.whole(resp.Body)
	}
	return a.stream(ctx, cancel, resp.Body)
}

// badUpstream is an upstream answer the gateway cannot relay: the next
// connection gets the request.
func badUpstream(msg string) error {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "api_error", "code": "bad_upstream_response"}})
	return &credential.UpstreamError{Status: http.StatusBadGateway, Body: b}
}

// whole relays a non-streamed answer.
func (a *attempt) whole(r io.Reader) (Usage, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxBody))
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	if a.anthropic() {
		out, tu, err := translate.AnthropicToOpenAIResponse(raw, a.t.Model)
		if err != nil {
			return Usage{}, badUpstream("upstream returned an invalid message")
		}
		raw, u = out, fromTranslate(tu)
	} else {
		if !json.Valid(raw) {
			return Usage{}, badUpstream("upstream returned invalid JSON")
		}
		var body struct {
			Usage *usageJSON `json:"usage"`
		}
		_ = json.Unmarshal(raw, &body)
		u = body.Usage.usage()
	}
	if err := a.begin(); err != nil {
		return Usage{}, credential.Committed(err)
	}
	if err := a.sink.Completion(raw); err != nil {
		return Usage{}, credential.Committed(err)
	}
	return u, nil
}

// stream relays a streamed answer event by event.
func (a *attempt) stream(ctx context.Context, cancel context.CancelCauseFunc, r io.Reader) (Usage, error) {
	watchdog := time.AfterFunc(a.svc.opts.FirstEventTimeout, func() { cancel(errFirstEvent) })
	defer watchdog.Stop()
	rd := sse.NewReader(r, maxEvent)
	var (
		u        Usage
		finished bool
		tr       *translate.StreamTranslator
	)
	if a.anthropic() {
		tr = translate.NewStreamTranslator(a.t.Model, a.p.includeUsage)
	}
	emit := func(data []byte) error {
		if !a.sent {
			if err := a.begin(); err != nil {
				return err
			}
			a.sent = true
		}
		if err := a.sink.Chunk(data); err != nil {
			return err
		}
		a.delivered.add(data)
		return nil
	}
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tr != nil {
					finished = tr.Done()
					u = fromTranslate(tr.Usage())
				}
				if finished {
					return u, nil
				}
				return u, a.fail("stream_interrupted", "the upstream ended the stream before it finished")
			}
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errFirstEvent):
				return u, a.fail("stream_stalled", fmt.Sprintf("the upstream sent nothing for %s", a.svc.opts.FirstEventTimeout))
			case errors.Is(cause, errStalled):
				return u, a.fail("stream_stalled", fmt.Sprintf("the upstream stream stalled for %s", a.svc.opts.StallTimeout))
			case ctx.Err() != nil:
				return u, ctx.Err()
			}
			return u, a.fail("stream_interrupted", "the upstream stream broke off")
		}
		watchdog.Reset(a.svc.opts.StallTimeout)
		if tr != nil {
			err := tr.Event(ev.Name, ev.Data, emit)
			if err != nil {
				if a.sent || ctx.Err() != nil {
					return u, a.fail("upstream_error", err.Error())
				}
				return u, badUpstream(err.Error())
			}
			if tr.Done() {
				return fromTranslate(tr.Usage()), nil
			}
			continue
		}
		if bytes.Equal(ev.Data, []byte("[DONE]")) {
			if !finished {
				return u, a.fail("stream_interrupted", "the upstream ended the stream before it finished")
			}
			return u, nil
		}
		if !json.Valid(ev.Data) {
			return u, a.fail("stream_malformed", "the upstream sent a malformed event")
		}
		c := inspect(ev.Data)
		if c.err {
			return u, a.fail("upstream_error", "the upstream reported an error mid-stream")
		}
		if c.usage != nil {
			u = c.usage.usage()
			if c.usageOnly && !a.p.includeUsage {
				continue // asked for the gateway's accounting, not the client's
			}
		}
		if c.finished {
			finished = true
		}
		if err := emit(ev.Data); err != nil {
			return u, credential.Committed(err)
		}
	}
}

// fail ends a stream: after the first event it is committed (the client gets
// an in-band error); before it, the next connection may try.
func (a *attempt) fail(code, msg string) error {
	err := &StreamError{Code: code, Message: msg}
	if a.sent {
		return credential.Committed(err)
	}
	return badUpstream(msg)
}

// usageJSON is OpenAI's usage object.
type usageJSON struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage converts; completion tokens already include reasoning tokens, which
// are kept apart only for reporting, never added again.
func (u *usageJSON) usage() Usage {
	if u == nil {
		return Usage{}
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: total,
		CachedTokens: u.PromptTokensDetails.CachedTokens, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens,
	}
}

func fromTranslate(u translate.Usage) Usage {
	return Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens,
	}
}

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
