package chat

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// A Messages request with more stop sequences than OpenAI takes is the
// client's 400 on stop_sequences when it goes to OpenAI, and goes whole to
// a chat upstream without a known limit.
func TestMessagesStopSequencesByUpstream(t *testing.T) {
	reg := provider.NewRegistry()
	body := []byte(`{"model":"m","max_tokens":64,"stop_sequences":["a","b","c","d","e"],"messages":[{"role":"user","content":"hi"}]}`)
	in, err := parse(DialectMessages, body)
	require.NoError(t, err)

	spec, ok := reg.Lookup("openai")
	require.True(t, ok)
	_, err = pick(DialectMessages, spec, "gpt-4o").request(in, "gpt-4o")
	var re *RequestError
	require.True(t, errors.As(err, &re), "a request error: %v", err)
	assert.Equal(t, "stop_sequences", re.Param)

	spec, ok = reg.Lookup("groq")
	require.True(t, ok)
	got, err := pick(DialectMessages, spec, "m").request(in, "m")
	require.NoError(t, err)
	var sent struct {
		Stop []string `json:"stop"`
	}
	require.NoError(t, json.Unmarshal(got, &sent), "%s", got)
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, sent.Stop)
}
