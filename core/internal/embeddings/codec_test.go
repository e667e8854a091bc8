package embeddings

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHasShape(t *testing.T) {
	floatBody := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`
	b64Body := `{"object":"list","data":[{"object":"embedding","index":0,"embedding" : "AAAAAA=="}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`
	hasShape := func(raw []byte, format string) bool {
		_, _, _, ok := peek(raw, format)
		return ok
	}
	assert.True(t, hasShape([]byte(floatBody), FormatFloat))
	assert.False(t, hasShape([]byte(floatBody), FormatBase64))
	assert.True(t, hasShape([]byte(b64Body), FormatBase64))
	assert.False(t, hasShape([]byte(b64Body), FormatFloat))
	assert.False(t, hasShape([]byte(`{"data":[{"embedding":[1]}]}`), FormatFloat), "no usage: normalise")
	assert.False(t, hasShape([]byte(`{"object":"embedding","usage":{},"data":[]}`), FormatFloat))
}

func TestDecodeEncodeRoundTrip(t *testing.T) {
	v := []float32{0.5, -0.125, 3.25e-7, 1}
	for _, format := range []string{FormatFloat, FormatBase64} {
		body := encode(decoded{model: "m", vectors: [][]float32{v, {2}}, promptTokens: 4, totalTokens: 4}, format)
		model, p, tot, ok := peek(body, format)
		assert.True(t, ok, "%s", body)
		d, err := decode(body)
		require.NoError(t, err)
		assert.Equal(t, [][]float32{v, {2}}, d.vectors, format)
		assert.Equal(t, "m", d.model)
		assert.EqualValues(t, 4, p)
		assert.EqualValues(t, 4, tot)
		assert.Equal(t, "m", model)
	}
}

func TestDecodeOrdersByIndexAndRejectsGarbage(t *testing.T) {
	d, err := decode([]byte(`{"data":[{"index":1,"embedding":[2]},{"index":0,"embedding":[1]}],"usage":{"prompt_tokens":2}}`))
	require.NoError(t, err)
	assert.Equal(t, [][]float32{{1}, {2}}, d.vectors)
	assert.EqualValues(t, 2, d.totalTokens, "total falls back to prompt tokens")
	for _, bad := range []string{`[]`, `{"data":[{"embedding":"!!"}]}`, `{"data":[{"embedding":{}}]}`, `{}`, `{"data":[{"embedding":"AAA="}]}`} {
		_, err := decode([]byte(bad))
		assert.Error(t, err, bad)
	}
}
