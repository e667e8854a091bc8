package chat

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memoryResponses is a ResponseStore in a map.
type memoryResponses struct {
	mu      sync.Mutex
	records map[string][]byte
}

var _ ResponseStore = (*memoryResponses)(nil)

func (s *memoryResponses) Get(_ context.Context, machineID, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[machineID+"."+id]
	if !ok {
		return nil, ErrResponseNotFound
	}
	return rec, nil
}

func (s *memoryResponses) Put(_ context.Context, machineID, id string, rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[machineID+"."+id] = rec
	return nil
}

// Two conversations on a chat upstream whose completions share an id
// (Ollama answers "chatcmpl-" and a number below a thousand) are stored
// under two response ids, and previous_response_id continues each one with
// its own history, never the other's.
func TestTranslatedResponsesSharingAnUpstreamIDAreStoredApart(t *testing.T) {
	svc := &Service{opts: Options{Responses: &memoryResponses{records: map[string][]byte{}}}}
	ctx := context.Background()
	quote := func(s string) string {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		return string(b)
	}
	// turn sends input (after previous, when set) and stores the upstream's
	// answer; it returns the response id and the body sent upstream.
	turn := func(previous, input, answer string) (string, string) {
		body := `{"model":"local/llama3","input":` + quote(input)
		if previous != "" {
			body += `,"previous_response_id":` + quote(previous)
		}
		in, err := parse(DialectResponses, []byte(body+`}`))
		require.NoError(t, err)
		require.NoError(t, svc.continueFrom(ctx, "m1", &in))
		completion := `{"id":"chatcmpl-42","object":"chat.completion","model":"llama3","choices":[{"index":0,"message":{"role":"assistant","content":` +
			quote(answer) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
		out, _, err := responsesOpenAI{}.whole(inbound{}, []byte(completion), "llama3")
		require.NoError(t, err)
		require.NoError(t, svc.store("m1", in, out))
		var r struct{ ID string }
		require.NoError(t, json.Unmarshal(out, &r))
		return r.ID, string(in.body)
	}
	alice, _ := turn("", "my name is Alice", "hi Alice")
	bob, _ := turn("", "my name is Bob", "hi Bob")
	require.NotEqual(t, alice, bob, "two answers, two response ids")

	_, sent := turn(alice, "what is my name?", "Alice")
	assert.Contains(t, sent, "my name is Alice")
	assert.Contains(t, sent, "hi Alice")
	assert.NotContains(t, sent, "Bob", "never another conversation")

	got, err := svc.GetResponse(ctx, "m1", alice)
	require.NoError(t, err)
	assert.Contains(t, string(got), "hi Alice", "GET /v1/responses/{id} answers the first conversation")
}
