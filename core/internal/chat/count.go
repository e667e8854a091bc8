package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// CountTokens answers an Anthropic count_tokens request: an Anthropic-shaped
// upstream counts (pass-through, model swapped); any other gets the
// gateway's estimate, with no upstream call.
func (s *Service) CountTokens(ctx context.Context, req Request) ([]byte, dispatch.Result, error) {
	in, err := parse(DialectMessages, withMaxTokens(req.Body))
	if err != nil {
		return nil, dispatch.Result{}, err
	}
	in.header = req.Header
	var out []byte
	res, err := s.d.Do(ctx, dispatch.Request{MachineID: req.MachineID, Model: in.model, Supports: Supports},
		func(ctx context.Context, t routing.Target, c *dispatch.Conn) error {
			if t.Spec.Format != provider.FormatAnthropic {
				out = estimateTokens(in)
				return nil
			}
			m, _ := json.Marshal(t.Model)
			body, err := json.Marshal(withModel(in.fields, m))
			if err != nil {
				return err
			}
			// The watchdog cancels the call when the upstream goes silent
			// after its headers, as for a whole answer.
			call, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			hreq, err := http.NewRequestWithContext(call, http.MethodPost, c.BaseURL+"/messages/count_tokens", bytes.NewReader(body))
			if err != nil {
				return err
			}
			hreq.Header.Set("Content-Type", "application/json")
			messagesAnthropic{}.header(hreq.Header, in)
			c.Authorize(hreq.Header)
			resp, err := c.Client.Do(hreq)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			sr := upstream.NewStallReader(resp.Body, s.opts.FirstEventTimeout, s.opts.StallTimeout, cancel)
			raw, err := io.ReadAll(io.LimitReader(sr, 1<<20))
			sr.Stop()
			if err != nil {
				return sr.Err(call, err)
			}
			if resp.StatusCode == http.StatusNotFound {
				// A compatible upstream without the endpoint: estimate.
				out = estimateTokens(in)
				return nil
			}
			if resp.StatusCode >= 300 {
				return &credential.UpstreamError{Status: resp.StatusCode, Header: resp.Header, Body: c.Scrub(raw)}
			}
			var n struct {
				InputTokens *int64 `json:"input_tokens"`
			}
			if json.Unmarshal(raw, &n) != nil || n.InputTokens == nil {
				return badUpstream("upstream returned an invalid token count")
			}
			out = raw
			return nil
		})
	return out, res, err
}

// withMaxTokens lets a count_tokens body (which has no max_tokens) pass
// the Messages parser.
func withMaxTokens(body []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return body
	}
	if _, ok := fields["max_tokens"]; ok {
		return body
	}
	fields["max_tokens"] = json.RawMessage("1")
	b, _ := json.Marshal(fields)
	return b
}

func withModel(fields map[string]json.RawMessage, model json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		if k != "max_tokens" { // count_tokens refuses it
			out[k] = v
		}
	}
	out["model"] = model
	return out
}

// estimateTokens is the gateway's estimate: about four bytes of the
// prompt's JSON (system, messages, tools) per token, images and PDFs
// counted as Anthropic counts them (countMedia) rather than by their bytes.
func estimateTokens(in inbound) []byte {
	n := 0
	for _, k := range []string{"system", "messages", "tools"} {
		n += len(in.fields[k])
	}
	media := countMedia(in.fields["messages"])
	n -= media.bytes
	b, _ := json.Marshal(map[string]int{"input_tokens": (n+3)/4 + media.tokens})
	return b
}
