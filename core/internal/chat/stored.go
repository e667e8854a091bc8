package chat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
)

// ErrResponseNotFound is a stored response that does not exist (or is no
// longer kept, or belongs to another machine).
var ErrResponseNotFound = errors.New("response not found")

// ResponseStore keeps Responses API answers stored with store (not false),
// for previous_response_id and GET /v1/responses/{id}. Records are per
// machine.
type ResponseStore interface {
	Get(ctx context.Context, machineID, id string) ([]byte, error)
	Put(ctx context.Context, machineID, id string, record []byte) error
}

// KVResponses is a ResponseStore on a key-value bucket whose TTL forgets
// old answers; every core replica sees the same records.
type KVResponses struct {
	KV jetstream.KeyValue
	// JS reaches the bucket's leader (Get); nil takes the bucket's answer.
	JS jetstream.JetStream
}

// maxStored bounds a record: larger conversations are not stored (the
// bucket's messages have a size limit).
const maxStored = 900 << 10

func responseKey(machineID, id string) (string, bool) {
	if id == "" || len(id) > 128 {
		return "", false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	return machineID + "." + id, true
}

func (s KVResponses) Get(ctx context.Context, machineID, id string) ([]byte, error) {
	key, ok := responseKey(machineID, id)
	if !ok {
		return nil, ErrResponseNotFound
	}
	// In a cluster, a member that has not yet applied an answer stored a
	// moment ago through another member misses it, and the turn continuing
	// it would be refused: the leader confirms a miss.
	v, _, err := kvmirror.GetConfirmed(ctx, s.JS, s.KV, key, 0)
	if errors.Is(err, kvmirror.ErrNotFound) {
		return nil, ErrResponseNotFound
	}
	return v, err
}

func (s KVResponses) Put(ctx context.Context, machineID, id string, record []byte) error {
	key, ok := responseKey(machineID, id)
	if !ok || len(record) > maxStored {
		return nil
	}
	_, err := s.KV.Put(ctx, key, record)
	return err
}

// storedRecord is what is kept of an answer: the response, and the whole
// conversation that led to it as input items.
type storedRecord struct {
	Response json.RawMessage   `json:"response"`
	Input    []json.RawMessage `json:"input"`
}

// GetResponse returns a stored response of the machine.
func (s *Service) GetResponse(ctx context.Context, machineID, id string) ([]byte, error) {
	if s.opts.Responses == nil {
		return nil, ErrResponseNotFound
	}
	raw, err := s.opts.Responses.Get(ctx, machineID, id)
	if err != nil {
		return nil, err
	}
	var rec storedRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	return rec.Response, nil
}

// inputItems is input as a list of items (a string is one user message).
func inputItems(raw json.RawMessage) []json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]string{"role": "user", "content": s})
		return []json.RawMessage{b}
	}
	var items []json.RawMessage
	_ = json.Unmarshal(raw, &items)
	return items
}

// outputAsInput turns a response's output into input items for the next
// turn: messages, function calls and custom tool calls (whose outputs the
// next turn may carry), without the ids and statuses only the answering
// upstream knows; reasoning and hosted tools' calls are not carried.
func outputAsInput(response json.RawMessage) []json.RawMessage {
	var r struct {
		Output []map[string]json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(response, &r)
	var out []json.RawMessage
	for _, it := range r.Output {
		var typ string
		_ = json.Unmarshal(it["type"], &typ)
		if typ != "message" && typ != "function_call" && typ != "custom_tool_call" {
			continue
		}
		delete(it, "id")
		delete(it, "status")
		b, _ := json.Marshal(it)
		out = append(out, b)
	}
	return out
}

// continueFrom expands previous_response_id: the stored conversation and
// its answer come before the request's input, and the field is not sent
// upstream (the gateway, not the upstream, keeps the conversation).
func (s *Service) continueFrom(ctx context.Context, machineID string, in *inbound) error {
	raw, ok := in.fields["previous_response_id"]
	if !ok || string(raw) == "null" {
		in.history = inputItems(in.fields["input"])
		return nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil || id == "" {
		return &RequestError{Param: "previous_response_id", Code: "invalid_type", Message: "'previous_response_id' must be a non-empty string"}
	}
	notFound := &RequestError{Param: "previous_response_id", Code: "previous_response_not_found",
		Message: "Previous response with id '" + id + "' not found."}
	if s.opts.Responses == nil {
		return notFound
	}
	rec, err := s.opts.Responses.Get(ctx, machineID, id)
	if errors.Is(err, ErrResponseNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	var prev storedRecord
	if err := json.Unmarshal(rec, &prev); err != nil {
		return notFound
	}
	items := append(append(prev.Input, outputAsInput(prev.Response)...), inputItems(in.fields["input"])...)
	in.history = items
	fields := make(map[string]json.RawMessage, len(in.fields))
	for k, v := range in.fields {
		if k != "previous_response_id" {
			fields[k] = v
		}
	}
	fields["input"], _ = json.Marshal(items)
	body, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	in.fields, in.body, in.previous = fields, body, raw
	return nil
}

// storing reports whether the request asked to store its answer (OpenAI's
// default is to store).
func (in inbound) storing() bool {
	raw, ok := in.fields["store"]
	if !ok || string(raw) == "null" {
		return true
	}
	var b bool
	return json.Unmarshal(raw, &b) != nil || b
}

// capture stores the final response of a Responses answer before it
// passes to the sink: a client that continues the answer the moment it has
// its end (previous_response_id, as the SDKs' agents do) finds it stored.
// The response is stored once, however the answer ends (whole, completed or
// incomplete).
type capture struct {
	Sink
	keep   func(response json.RawMessage)
	stored bool
}

func (c *capture) Completion(data []byte) error {
	c.final(data)
	return c.Sink.Completion(data)
}

func (c *capture) Chunk(event string, data []byte) error {
	c.see(event, data)
	return c.Sink.Chunk(event, data)
}

// captureBatch is a capture whose sink carries events in batches: a batch
// holding the final event waits for the response to be stored.
type captureBatch struct {
	*capture
	batch BatchSink
}

func (c captureBatch) Events(evs []Event) error {
	for _, ev := range evs {
		c.see(ev.Name, ev.Data)
	}
	return c.batch.Events(evs)
}

// see stores the final response when an event carries it.
func (c *capture) see(event string, data []byte) {
	if event == "response.completed" || event == "response.incomplete" {
		var ev struct {
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(data, &ev) == nil {
			c.final(ev.Response)
		}
	}
}

// final stores the answer's final response, the first time.
func (c *capture) final(response json.RawMessage) {
	if c.stored {
		return
	}
	c.stored = true
	c.keep(response)
}

// storeTimeout bounds the storing of an answer, which its client waits
// for: past it the answer goes on unstored.
const storeTimeout = 5 * time.Second

// store keeps a finished answer and the conversation that led to it.
func (s *Service) store(machineID string, in inbound, response json.RawMessage) error {
	if s.opts.Responses == nil || len(response) == 0 || !in.storing() {
		return nil
	}
	var r struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(response, &r) != nil || r.ID == "" {
		return nil
	}
	rec, err := json.Marshal(storedRecord{Response: response, Input: in.history})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(s.storeWait, storeTimeout))
	defer cancel()
	return s.opts.Responses.Put(ctx, machineID, r.ID, rec)
}
