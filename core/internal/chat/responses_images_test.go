package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// The image of a function call's output reaches a Claude model, which takes
// images, through the Messages request both translations make; a model
// the provider does not list as taking images is told an image was there.
func TestResponsesToolOutputImageReachesAnthropic(t *testing.T) {
	spec, ok := provider.NewRegistry().Lookup("anthropic")
	require.True(t, ok)
	body := []byte(`{"model":"m","input":[{"role":"user","content":"look"},
		{"type":"function_call","call_id":"toolu_1","name":"view_image","arguments":"{}"},
		{"type":"function_call_output","call_id":"toolu_1","output":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`)
	in, err := parse(DialectResponses, body)
	require.NoError(t, err)
	got, err := pick(DialectResponses, spec, "claude-sonnet-4-6").request(in, "claude-sonnet-4-6")
	require.NoError(t, err)
	assert.Contains(t, string(got), `"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`, "%s", got)

	got, err = pick(DialectResponses, spec, "unlisted").request(in, "unlisted")
	require.NoError(t, err)
	assert.Contains(t, string(got), `[image]`, "%s", got)
	assert.NotContains(t, string(got), `"type":"image"`, "%s", got)
}
