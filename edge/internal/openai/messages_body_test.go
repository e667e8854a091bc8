package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// A body the edge could not hold answers the Messages route in Anthropic's
// shape with the same status and Retry-After as on the OpenAI routes.
func TestMessagesBodyProblemsKeepTheirHeaders(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", io.NopCloser(errReader{ErrBodyMemory}))
	w := httptest.NewRecorder()
	_, _, ok := readAnthropicBody(w, r)
	require.False(t, ok)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"), "the busy answer says when to come back")
	var body struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	assert.Equal(t, "error", body.Type)
	assert.True(t, strings.Contains(body.Error.Message, ErrBodyMemory.Error()), body.Error.Message)
}
