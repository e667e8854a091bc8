package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// A Responses request an Anthropic-shaped upstream cannot take is refused
// naming the request's own field, not the field of the chat request it
// passes through.
func TestResponsesOnAnthropicRefusalsNameTheirField(t *testing.T) {
	spec, ok := provider.NewRegistry().Lookup("anthropic")
	require.True(t, ok)
	for body, param := range map[string]string{
		`{"model":"m","input":"hi","max_output_tokens":0}`:         "max_output_tokens",
		`{"model":"m","input":"hi","reasoning":{"effort":"lots"}}`: "reasoning.effort",
		`{"model":"m","input":[]}`:                                 "input",
	} {
		in, err := parse(DialectResponses, []byte(body))
		require.NoError(t, err)
		_, err = pick(DialectResponses, spec, "claude-sonnet-4-6").request(in, "claude-sonnet-4-6")
		var re *RequestError
		require.ErrorAs(t, err, &re, body)
		assert.Equal(t, param, re.Param, body)
	}
}
