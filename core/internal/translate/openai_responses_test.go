package translate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Chat Completions answers as /v1/responses clients see them.

// responseEvents feeds chunks to a ChunkToResponses and returns the events
// it sent, by name and decoded, and whether the answer was complete.
func responseEvents(t *testing.T, chunks ...string) ([]string, []map[string]any, bool) {
	t.Helper()
	tr := NewChunkToResponses("m")
	var names []string
	var events []map[string]any
	emit := func(name string, data []byte) error {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(data, &ev))
		names, events = append(names, name), append(events, ev)
		return nil
	}
	for _, c := range chunks {
		require.NoError(t, tr.Chunk([]byte(c), emit))
	}
	complete, err := tr.Finish(emit)
	require.NoError(t, err)
	return names, events, complete
}

// wholeResponse translates a chat.completion and decodes the response.
func wholeResponse(t *testing.T, completion string) map[string]any {
	t.Helper()
	out, _, err := OpenAIToResponsesResponse([]byte(completion), "m")
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal(out, &r))
	return r
}

// The id of a translated response is the key its answer is stored under:
// two answers whose upstream gave them one completion id (Ollama's are
// "chatcmpl-" and a number below a thousand) get two response ids, whole
// and streamed.
func TestResponsesIDsAreMintedNotTheUpstreams(t *testing.T) {
	completion := `{"id":"chatcmpl-42","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	first, second := wholeResponse(t, completion)["id"], wholeResponse(t, completion)["id"]
	require.IsType(t, "", first)
	assert.Regexp(t, `^resp_[a-z0-9]{20,}$`, first)
	assert.NotEqual(t, first, second, "whole")

	chunks := []string{
		`{"id":"chatcmpl-42","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}`,
		`{"id":"chatcmpl-42","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	}
	streamID := func() string {
		names, events, complete := responseEvents(t, chunks...)
		require.True(t, complete)
		id := events[0]["response"].(map[string]any)["id"].(string)
		require.Equal(t, "response.completed", names[len(names)-1])
		assert.Equal(t, id, events[len(events)-1]["response"].(map[string]any)["id"], "one id from created to completed")
		return id
	}
	a, b := streamID(), streamID()
	assert.Regexp(t, `^resp_[a-z0-9]{20,}$`, a)
	assert.NotEqual(t, a, b, "streamed")
}
