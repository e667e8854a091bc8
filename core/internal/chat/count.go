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

// messageOverhead is what the estimate adds for each message: its role and
// the markers around its turn.
const messageOverhead = 4

// estimateTokens is the gateway's estimate of a Messages request's input
// tokens: four bytes of the text a model reads a token, rounded up, plus
// messageOverhead a message, plus images and PDFs as Anthropic counts them
// (count_media.go). The text is the system prompt's; each message's text
// blocks; each tool use's name and input (as compact JSON); each tool
// result's content; a text document's text, title and context; and each
// tool's name, description and input schema (as compact JSON). Roles,
// types, ids, cache_control and the JSON around the text are not read;
// thinking blocks are not counted (Anthropic leaves the thinking of earlier
// turns out of the context).
func estimateTokens(in inbound) []byte {
	var c promptCount
	c.content(in.fields["system"])
	var msgs []struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(in.fields["messages"], &msgs) == nil {
		for _, m := range msgs {
			c.content(m.Content)
		}
	}
	var tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if json.Unmarshal(in.fields["tools"], &tools) == nil {
		for _, t := range tools {
			c.text += len(t.Name) + len(t.Description) + compactLen(t.InputSchema)
		}
	}
	n := (c.text+3)/4 + len(msgs)*messageOverhead + c.media
	b, _ := json.Marshal(map[string]int{"input_tokens": n})
	return b
}

// promptCount is what estimateTokens has counted: bytes of text, and the
// tokens of images and PDFs.
type promptCount struct {
	text, media int
}

// contentBlock is the part of a content block the estimate reads.
type contentBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"`
	Source  json.RawMessage `json:"source"`
	Title   string          `json:"title"`
	Context string          `json:"context"`
}

// content counts a message's (or the system prompt's, or a tool result's)
// content: a string, or a list of blocks.
func (c *promptCount) content(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			c.text += len(s)
		}
	case '[':
		var blocks []json.RawMessage
		if json.Unmarshal(raw, &blocks) != nil {
			return
		}
		for _, b := range blocks {
			c.block(b)
		}
	}
}

// block counts one content block by its type; one of a type not named here
// counts the characters of its strings but for ids, types and the like
// (textChars).
func (c *promptCount) block(raw json.RawMessage) {
	var b contentBlock
	if json.Unmarshal(raw, &b) != nil {
		return
	}
	switch b.Type {
	case "text":
		c.text += len(b.Text)
	case "thinking", "redacted_thinking":
	case "tool_use", "server_tool_use", "mcp_tool_use":
		c.text += len(b.Name) + compactLen(b.Input)
	case "tool_result", "mcp_tool_result":
		c.content(b.Content)
	case "image", "document":
		var src map[string]any
		if json.Unmarshal(b.Source, &src) != nil || src == nil {
			return
		}
		c.text += len(b.Title) + len(b.Context)
		switch kind, _ := src["type"].(string); {
		case b.Type == "document" && kind == "text":
			data, _ := src["data"].(string)
			c.text += len(data)
		case b.Type == "document" && kind == "content":
			content, _ := json.Marshal(src["content"])
			c.content(content)
		default:
			c.media += mediaTokens(b.Type, src)
		}
	default:
		c.text += int(textChars(raw))
	}
}

// compactLen is the length of a JSON value without its insignificant
// spaces.
func compactLen(raw json.RawMessage) int {
	if len(raw) == 0 {
		return 0
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return len(raw)
	}
	return b.Len()
}
