package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/jsonscan"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// CountTokens answers an Anthropic count_tokens request: an Anthropic-shaped
// upstream counts (pass-through, model swapped); any other gets the
// gateway's estimate, with no upstream call. A claude connection's count
// goes up without its SystemFirst line: Claude Code sends its own counts
// to Anthropic with its subscription token and no system prompt (it counts
// its prompt's parts one by one), and the client gets the count of what it
// sent, which the line's tokens would swell.
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
			fields := withModel(in.fields, m)
			// The messages as a request to the upstream carries them,
			// which its count validates alike.
			if msgs, ok := anthropicMessages(fields["messages"]); ok {
				fields["messages"] = msgs
			}
			body, err := json.Marshal(fields)
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

// maxContentDepth is how deep the estimate reads content: a message's
// blocks, a tool result's within them, a document's content source within
// that (as deep as Anthropic nests content), and one level more. A list of
// blocks nested deeper is counted as text, all its bytes, so the work stays
// in proportion to the body however deep it nests.
const maxContentDepth = 4

// estimateTokens is count_tokens' answer from the gateway's estimate
// (inputEstimate).
func estimateTokens(in inbound) []byte {
	b, _ := json.Marshal(map[string]int{"input_tokens": inputEstimate(in)})
	return b
}

// inputEstimate is the gateway's estimate of a Messages request's input
// tokens: four bytes of the text a model reads a token, rounded up, plus
// messageOverhead a message, plus images and PDFs as Anthropic counts them
// (count_media.go). The text is the system prompt's; each message's text
// blocks; each tool use's name and input (as compact JSON); each tool
// result's content; a text document's text, title and context; and each
// tool's name, description and input schema (as compact JSON). Roles,
// types, ids, cache_control and the JSON around the text are not read;
// thinking blocks are not counted (Anthropic leaves the thinking of earlier
// turns out of the context). Content nested past maxContentDepth is counted
// as text, JSON and all.
func inputEstimate(in inbound) int {
	var c promptCount
	c.content(in.fields["system"], 0)
	msgs := 0
	jsonscan.Elements(in.fields["messages"], func(m []byte) bool {
		var content []byte
		jsonscan.Members(m, func(k, v []byte) bool {
			if strings.EqualFold(string(k), "content") {
				content = v
			}
			return true
		})
		msgs++
		c.content(content, 0)
		return true
	})
	jsonscan.Elements(in.fields["tools"], func(t []byte) bool {
		jsonscan.Members(t, func(k, v []byte) bool {
			switch key := string(k); {
			case strings.EqualFold(key, "name"), strings.EqualFold(key, "description"):
				n, _ := stringLen(v)
				c.text += n
			case strings.EqualFold(key, "input_schema"):
				c.text += compactLen(v)
			}
			return true
		})
		return true
	})
	return (c.text+3)/4 + msgs*messageOverhead + c.media
}

// promptCount is what estimateTokens has counted: bytes of text, and the
// tokens of images and PDFs.
type promptCount struct {
	text, media int
}

// contentBlock is the part of a content block the estimate reads: its
// type, the lengths of its other strings as decoded, and its other
// members' raw JSON.
type contentBlock struct {
	Type                       string
	Text, Name, Title, Context int
	Input, Content, Source     []byte
}

// read reads a block's members in place, as encoding/json reads them into
// a struct (names matched without regard to case, the last of a name
// winning, null leaving a member as it was), and reports whether the block
// is an object whose strings are strings.
func (b *contentBlock) read(raw []byte) bool {
	ok := true
	object := jsonscan.Members(raw, func(k, v []byte) bool {
		var n *int
		switch key := string(k); {
		case strings.EqualFold(key, "type"):
			if string(v) != "null" && json.Unmarshal(v, &b.Type) != nil {
				ok = false
			}
		case strings.EqualFold(key, "text"):
			n = &b.Text
		case strings.EqualFold(key, "name"):
			n = &b.Name
		case strings.EqualFold(key, "title"):
			n = &b.Title
		case strings.EqualFold(key, "context"):
			n = &b.Context
		case strings.EqualFold(key, "input"):
			b.Input = v
		case strings.EqualFold(key, "content"):
			b.Content = v
		case strings.EqualFold(key, "source"):
			b.Source = v
		}
		if n != nil && string(v) != "null" {
			l, isString := stringLen(v)
			ok = ok && isString
			*n = l
		}
		return ok
	})
	return object && ok
}

// content counts a message's (or the system prompt's, or a tool result's)
// content: a string, or a list of blocks, read when it is depth lists deep
// (a message's is 0) and depth is under maxContentDepth, else counted as
// text, all its bytes.
func (c *promptCount) content(raw []byte, depth int) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '"':
		n, _ := stringLen(raw)
		c.text += n
	case '[':
		if depth >= maxContentDepth {
			c.text += len(raw)
			return
		}
		jsonscan.Elements(raw, func(b []byte) bool {
			c.block(b, depth)
			return true
		})
	}
}

// block counts one content block of a list depth lists deep by its type;
// one of a type not named here counts the characters of its strings but
// for ids, types and the like (textChars).
func (c *promptCount) block(raw []byte, depth int) {
	var b contentBlock
	if !b.read(raw) {
		return
	}
	switch b.Type {
	case "text":
		c.text += b.Text
	case "thinking", "redacted_thinking":
	case "tool_use", "server_tool_use", "mcp_tool_use":
		c.text += b.Name + compactLen(b.Input)
	case "tool_result", "mcp_tool_result":
		c.content(b.Content, depth+1)
	case "image", "document":
		var src mediaSource
		if !src.read(b.Source) {
			return
		}
		c.text += b.Title + b.Context
		switch {
		case b.Type == "document" && src.Type == "text":
			c.text += len(src.Data)
		case b.Type == "document" && src.Type == "content":
			c.content(src.Content, depth+1)
		default:
			c.media += mediaTokens(b.Type, src)
		}
	default:
		c.text += int(textChars(raw))
	}
}

// compactLen is the length of a JSON value without its insignificant
// spaces (what json.Compact leaves of a valid one), counted in place.
func compactLen(raw []byte) int {
	n := 0
	for i := 0; i < len(raw); {
		switch raw[i] {
		case '"':
			end := jsonscan.StringEnd(raw, i)
			n += end - i
			i = end
		case ' ', '\t', '\n', '\r':
			i++
		default:
			n++
			i++
		}
	}
	return n
}

// stringLen is the length of the JSON string raw as encoding/json decodes
// it (jsonscan.Unquote), and whether raw is a string.
func stringLen(raw []byte) (int, bool) {
	s, ok := jsonscan.Unquote(raw)
	return len(s), ok
}
