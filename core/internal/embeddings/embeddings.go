// Package embeddings serves /v1/embeddings: it builds the upstream request,
// sends it through the dispatcher, and returns the upstream's body untouched
// when it already has the shape the client asked for, or normalised to
// OpenAI's shape when it does not.
package embeddings

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// Encoding formats (interface 2.2).
const (
	FormatFloat  = "float"
	FormatBase64 = "base64"
)

// maxResponse caps an upstream embeddings body (2048 inputs x 3072 floats as
// JSON text is about 120 MiB).
const maxResponse = 256 << 20

// Request is an embeddings request after validation.
type Request struct {
	Model string
	// Exactly one of Texts and Tokens is set.
	Texts      []string
	Tokens     [][]int64
	Dimensions *int32
	User       string
	// Format is the encoding the client wants.
	Format string
	// JSON asks for the OpenAI-shaped body instead of decoded vectors.
	JSON bool
	// Extra is a JSON object of members sent on to the upstream after the
	// ones above (provider-specific ones, such as input_type); empty for
	// none. ValidExtra checks it.
	Extra []byte
}

// Response is the answer.
type Response struct {
	// Model is the model that answered, as the upstream names it.
	Model        string
	Vectors      [][]float32
	PromptTokens int64
	TotalTokens  int64
	// Body is the OpenAI-shaped body (when the request asked for JSON).
	Body []byte
	// Upstream is the time spent waiting on upstreams.
	Upstream time.Duration
}

// Supports reports whether a provider offers embeddings (interface 4.2,
// embeddings rule 1).
func Supports(spec provider.Spec) bool {
	return spec.ID == "openai" || spec.ID == "openrouter" || spec.Family == provider.FamilyOpenAICompatible
}

// maxPooled is the largest upstream body whose buffer is kept for reuse.
const maxPooled = 1 << 20

// Options tune a Service.
type Options struct {
	// StallTimeout gives the request to the next connection when an
	// upstream, its headers sent, sends no byte of its body for this long
	// (zero: upstream.DefaultStallTimeout).
	StallTimeout time.Duration
}

// Service creates embeddings.
type Service struct {
	d    *dispatch.Dispatcher
	opts Options
	// bodies holds buffers (*[]byte) of upstream bodies read with a
	// Content-Length that nothing refers to any more: bodies decoded into
	// vectors or normalised, once fill returned. A body passed through
	// (Response.Body) is never put back: the edge writes it to its client
	// after the handler returned, and gRPC marshals it then. Nor is an
	// error body (UpstreamError.Body), which outlives the attempt.
	bodies sync.Pool
}

// New returns a Service.
func New(d *dispatch.Dispatcher, opts Options) *Service {
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = upstream.DefaultStallTimeout
	}
	return &Service{d: d, opts: opts}
}

// Create embeds the request's input.
func (s *Service) Create(ctx context.Context, machineID string, req Request) (Response, dispatch.Result, error) {
	want := req.Format
	if want == "" {
		want = FormatFloat
	}
	// A gRPC caller gets vectors: base64 is the cheaper wire format to decode.
	ask := want
	if !req.JSON {
		ask = FormatBase64
	}
	var out Response
	res, err := s.d.Do(ctx, dispatch.Request{MachineID: machineID, Model: req.Model, Supports: Supports},
		func(ctx context.Context, t routing.Target, c *dispatch.Conn) error {
			body := appendRequest(make([]byte, 0, requestSize(t.Model, &req)), t.Model, &req, ask)
			return s.attempt(ctx, c, body, want, req.JSON, inputs(&req), &out)
		})
	return out, res, err
}

// inputs is how many inputs a request embeds: one vector each.
func inputs(req *Request) int {
	if req.Tokens != nil {
		return len(req.Tokens)
	}
	return len(req.Texts)
}

// attempt sends body, which embeds n inputs, to one connection and fills
// out from its answer.
func (s *Service) attempt(ctx context.Context, c *dispatch.Conn, body []byte, want string, asJSON bool, n int, out *Response) error {
	start := time.Now()
	raw, buf, err := s.post(ctx, c, body)
	out.Upstream += time.Since(start)
	if err != nil {
		return err
	}
	kept, err := out.fill(raw, want, asJSON, n)
	if err != nil {
		if ue := errorInOK(raw); ue != nil {
			ue.Body = c.Scrub(ue.Body)
			err = ue
		}
	}
	if buf != nil && !kept {
		s.bodies.Put(buf)
	}
	return err
}

// post sends the body to {base}/embeddings and returns a 2xx body, with
// the pooled buffer that holds it when it has one; an error answer is a
// *credential.UpstreamError.
func (s *Service) post(ctx context.Context, c *dispatch.Conn, body []byte) ([]byte, *[]byte, error) {
	// The watchdog cancels the call when the upstream goes silent after
	// its headers.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The upstream sends its headers only once the vectors are computed.
	hreq, err := http.NewRequestWithContext(upstream.WholeAnswer(ctx), http.MethodPost, c.BaseURL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	c.Authorize(hreq.Header)
	resp, err := c.Client.Do(hreq)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	sr := upstream.NewStallReader(resp.Body, s.opts.StallTimeout, s.opts.StallTimeout, cancel)
	defer sr.Stop()
	if resp.StatusCode >= 300 {
		// An error answer is read up to the bound chat reads one to, past
		// which it is cut: the length it declares is only believed below
		// that bound.
		raw, err := readBody(sr, resp.ContentLength, nil, upstream.MaxErrorBody)
		if err != nil {
			return nil, nil, sr.Err(ctx, err)
		}
		return nil, nil, &credential.UpstreamError{Status: resp.StatusCode, Header: resp.Header, Body: c.Scrub(raw)}
	}
	var buf *[]byte
	if n := resp.ContentLength; n > 0 && n <= maxPooled {
		buf = s.buffer(int(n))
	}
	raw, err := readBody(sr, resp.ContentLength, buf, maxResponse)
	if err != nil {
		if buf != nil {
			s.bodies.Put(buf)
		}
		return nil, nil, sr.Err(ctx, err)
	}
	return raw, buf, nil
}

// buffer returns a pooled buffer of length n, or a new one.
func (s *Service) buffer(n int) *[]byte {
	if b, ok := s.bodies.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

// fill reads an upstream's success body, the answer to n inputs, into the
// response. A body that is not an embeddings list of n vectors is the
// upstream's fault (502), so the next connection gets the request: a
// list short of vectors (OpenRouter answers token ids with an empty one)
// would leave the client without some, or pair them with the wrong
// inputs. A body is passed through when its last vector's index is n-1;
// any other is decoded, and its vectors counted.
// kept says whether the response refers to raw (the body passed
// through); nothing else of the response does: decode copies what it
// reads.
func (r *Response) fill(raw []byte, want string, asJSON bool, n int) (kept bool, err error) {
	if asJSON {
		if model, prompt, total, ok := peek(raw, want); ok && lastIndex(raw) == int64(n)-1 {
			r.Body, r.Model, r.PromptTokens, r.TotalTokens = raw, model, prompt, total
			return true, nil
		}
	}
	d, err := decode(raw)
	if err == nil && len(d.vectors) != n {
		err = errBadBody
	}
	if err != nil {
		return false, &credential.UpstreamError{Status: http.StatusBadGateway, Body: []byte(`{"error":{"message":"upstream returned an invalid embeddings body","type":"api_error","code":"bad_upstream_response"}}`)}
	}
	r.Model, r.PromptTokens, r.TotalTokens = d.model, d.promptTokens, d.totalTokens
	if asJSON {
		r.Body = encode(d, want)
		return false, nil
	}
	r.Vectors = d.vectors
	return false, nil
}

// errorInOK is the failed attempt of an error answered with a success
// status (OpenRouter does: {"error":{"message","code"}}), with the status
// the error stands for (upstream.OpenAIError) and the error as the
// upstream wrote it, copied out of raw; nil when raw is no such error.
func errorInOK(raw []byte) *credential.UpstreamError {
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &b) != nil {
		return nil
	}
	body, status, ok := upstream.OpenAIError(b.Error)
	if !ok {
		return nil
	}
	return &credential.UpstreamError{Status: status, Body: body}
}

// readBody reads a response body up to limit bytes, sized from its
// Content-Length n (-1: unknown) when the upstream sent one no larger than
// limit, so a large body is not grown and copied piecemeal: into buf when
// given (it has that length). A body longer than limit is cut there.
func readBody(body io.Reader, n int64, buf *[]byte, limit int64) ([]byte, error) {
	if n > 0 && n <= limit {
		var b []byte
		if buf != nil {
			b = (*buf)[:n:n] // what the body holds past n is out of reach
		} else {
			b = make([]byte, n)
		}
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(io.LimitReader(body, limit))
}
