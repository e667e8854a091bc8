package chat

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/sse"
)

// assembler is an upstream shape that can build its whole answer from its
// own stream: what a non-streamed request gets from an upstream that only
// streams (provider.Spec.StreamOnly).
type assembler interface {
	// assemble reads the upstream's stream to its end and returns the
	// non-streamed answer body it amounts to; event is called on every
	// event read, comment on every keep-alive comment (the watchdog's
	// signs of life).
	assemble(r io.Reader, event, comment func()) ([]byte, error)
}

var _ assembler = toResponses{}

// assemble builds a Responses object from a Responses stream: the final
// response.completed (or response.incomplete) object, its output filled
// from the output_item.done events when the backend left it empty.
func (toResponses) assemble(r io.Reader, event, comment func()) ([]byte, error) {
	rd := sse.NewReader(r, maxEvent)
	defer rd.Release() // what is kept of the events was copied from them
	rd.OnComment(comment)
	var items []json.RawMessage
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil, badUpstream("the upstream ended the stream before it finished")
		}
		if err != nil {
			return nil, badUpstream("the upstream stream broke off")
		}
		event()
		var e struct {
			Type        string          `json:"type"`
			OutputIndex *int            `json:"output_index"`
			Item        json.RawMessage `json:"item"`
			Response    json.RawMessage `json:"response"`
			Error       json.RawMessage `json:"error"`
		}
		if len(ev.Data) == 0 || string(ev.Data) == "[DONE]" {
			continue
		}
		if json.Unmarshal(ev.Data, &e) != nil {
			return nil, badUpstream("the upstream sent a malformed event")
		}
		if e.Type == "" {
			e.Type = ev.Name
		}
		switch e.Type {
		case "response.output_item.done":
			if e.OutputIndex != nil && *e.OutputIndex >= 0 && *e.OutputIndex < 4096 && len(e.Item) > 0 {
				for len(items) <= *e.OutputIndex {
					items = append(items, nil)
				}
				items[*e.OutputIndex] = e.Item
			}
		case "response.completed", "response.incomplete":
			return fillOutput(e.Response, items)
		case "response.failed", "error":
			// The backend's own error (context_length_exceeded is the
			// client's to act on), with the status it stands for.
			return nil, responsesEventError(e.Type, ev.Data)
		}
	}
}

// fillOutput sets a response object's output to items when it has none.
func fillOutput(resp json.RawMessage, items []json.RawMessage) ([]byte, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(resp, &obj) != nil {
		return nil, badUpstream("upstream returned an invalid response")
	}
	var out []json.RawMessage
	_ = json.Unmarshal(obj["output"], &out)
	if len(out) > 0 || len(items) == 0 {
		return resp, nil
	}
	kept := items[:0]
	for _, it := range items {
		if it != nil {
			kept = append(kept, it)
		}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	obj["output"] = b
	return json.Marshal(obj)
}

// fitBody makes a request body one the upstream accepts: the members it
// refuses left out, those it requires set (provider.Spec's Omit and
// Require), and "stream": true when a whole answer is to be assembled from
// its stream. A body that needs none of it is returned as it is.
func fitBody(body []byte, spec provider.Spec, stream bool) ([]byte, error) {
	if len(spec.Omit) == 0 && len(spec.Require) == 0 && !stream {
		return body, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	for _, k := range spec.Omit {
		delete(obj, k)
	}
	for k, v := range spec.Require {
		obj[k] = json.RawMessage(v)
	}
	if stream {
		obj["stream"] = json.RawMessage("true")
	}
	return json.Marshal(obj)
}
