package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// A Responses-only upstream (codex) has no stop sequences: a request that
// asks for one is refused naming its own field, not answered past it.
func TestStopOnResponsesUpstreamIsRefused(t *testing.T) {
	spec, ok := provider.NewRegistry().Lookup("codex")
	require.True(t, ok)
	for _, tc := range []struct {
		dialect     Dialect
		body, param string
	}{
		{DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["END"]}`, "stop"},
		{DialectMessages, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["END"]}`, "stop_sequences"},
	} {
		in, err := parse(tc.dialect, []byte(tc.body))
		require.NoError(t, err)
		_, err = pick(tc.dialect, spec, "gpt-5").request(in, "gpt-5")
		var re *RequestError
		require.ErrorAs(t, err, &re, tc.body)
		assert.Equal(t, tc.param, re.Param, tc.body)
		assert.Contains(t, re.Message, "stop", tc.body)
	}
}
