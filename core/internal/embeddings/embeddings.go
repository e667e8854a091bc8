// Package embeddings serves /v1/embeddings: it builds the upstream request,
// sends it through the dispatcher, and returns the upstream's body untouched
// when it already has the shape the client asked for, or normalised to
// OpenAI's shape when it does not.
package embeddings

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
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

// Service creates embeddings.
type Service struct {
	d *dispatch.Dispatcher
}

// New returns a Service.
func New(d *dispatch.Dispatcher) *Service { return &Service{d: d} }

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
			start := time.Now()
			raw, err := post(ctx, c, body)
			out.Upstream += time.Since(start)
			if err != nil {
				return err
			}
			return out.fill(raw, want, req.JSON)
		})
	return out, res, err
}

// post sends the body to {base}/embeddings and returns a 2xx body; an error
// answer is a *credential.UpstreamError.
func post(ctx context.Context, c *dispatch.Conn, body []byte) ([]byte, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	c.Authorize(hreq.Header)
	resp, err := c.Client.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := readBody(resp)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, &credential.UpstreamError{Status: resp.StatusCode, Header: resp.Header, Body: c.Scrub(raw)}
	}
	return raw, nil
}

// fill reads an upstream's success body into the response. A body that is
// not an embeddings list is the upstream's fault (502), so the next
// connection gets the request.
func (r *Response) fill(raw []byte, want string, asJSON bool) error {
	if asJSON {
		if model, prompt, total, ok := peek(raw, want); ok {
			r.Body, r.Model, r.PromptTokens, r.TotalTokens = raw, model, prompt, total
			return nil
		}
	}
	d, err := decode(raw)
	if err != nil {
		return &credential.UpstreamError{Status: http.StatusBadGateway, Body: []byte(`{"error":{"message":"upstream returned an invalid embeddings body","type":"api_error","code":"bad_upstream_response"}}`)}
	}
	r.Model, r.PromptTokens, r.TotalTokens = d.model, d.promptTokens, d.totalTokens
	if asJSON {
		r.Body = encode(d, want)
		return nil
	}
	r.Vectors = d.vectors
	return nil
}

// readBody reads a response body whole, sized from its Content-Length when
// the upstream sent one, so a large body is not grown and copied piecemeal.
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxResponse {
		buf := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxResponse))
}
