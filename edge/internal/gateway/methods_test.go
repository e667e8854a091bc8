package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/inproc"
)

// besideRoutes are routes the edge serves beside the gateway, as edge.New
// passes them.
var besideRoutes = []string{
	"GET /healthz",
	"POST /v1/chat/completions", "POST /{machineId}/v1/chat/completions",
	"POST /v1/embeddings", "POST /{machineId}/v1/embeddings",
	"POST /v1/audio/transcriptions", "POST /v1/audio/speech",
	"POST /v1/messages", "POST /v1/messages/count_tokens",
	"POST /v1/responses", "GET /v1/responses/{id}",
}

// A route asked with a method it does not take answers 405 with the
// methods it takes in Allow, in the route's own error shape (Anthropic's
// under /v1/messages): the gateway's routes, and the routes the edge serves
// beside the gateway, whose other methods reach it. A path no route has is
// 404.
func TestWrongMethodAnswersAllow(t *testing.T) {
	mux, err := New(context.Background(), inproc.New(nil, nil), nil, besideRoutes)
	require.NoError(t, err)
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
		anthropic    bool
	}{
		{"PUT", "/api/settings", 405, "GET, PATCH", false},
		{"POST", "/v1/models", 405, "GET", false},
		{"HEAD", "/v1/models", 405, "GET", false},
		{"DELETE", "/api/keys", 405, "GET, POST", false},
		{"POST", "/v1/models/openai/gpt-4o", 405, "GET", false},
		{"GET", "/v1/chat/completions", 405, "POST", false},
		{"GET", "/0123456789abcdef/v1/chat/completions", 405, "POST", false},
		{"GET", "/v1/embeddings", 405, "POST", false},
		{"PUT", "/0123456789abcdef/v1/embeddings", 405, "POST", false},
		{"GET", "/v1/responses", 405, "POST", false},
		{"DELETE", "/v1/responses/resp_1", 405, "GET", false},
		{"GET", "/v1/audio/transcriptions", 405, "POST", false},
		{"GET", "/v1/audio/speech", 405, "POST", false},
		{"GET", "/v1/messages", 405, "POST", true},
		{"GET", "/v1/messages/count_tokens", 405, "POST", true},
		{"POST", "/healthz", 405, "GET", false},
		{"GET", "/v1/nothing", 404, "", false},
		{"GET", "/api/nothing", 404, "", false},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
			require.Equal(t, c.status, rec.Code, rec.Body.String())
			assert.Equal(t, c.allow, rec.Header().Get("Allow"))
			if c.method == http.MethodHead {
				return
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type string  `json:"type"`
					Code *string `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
			if c.anthropic {
				assert.Equal(t, "error", body.Type, rec.Body.String())
				assert.Equal(t, "invalid_request_error", body.Error.Type, rec.Body.String())
				return
			}
			require.NotNil(t, body.Error.Code, rec.Body.String())
			want := "method_not_allowed"
			if c.status == 404 {
				want = "unknown_route"
			}
			assert.Equal(t, want, *body.Error.Code)
		})
	}
}

// A path under /v1/messages that no route has (Anthropic's batches, which
// the gateway does not serve) answers 404 in Anthropic's shape, as every
// other error on the Messages routes does.
func TestUnknownMessagesPathsAnswerInAnthropicsShape(t *testing.T) {
	mux, err := New(context.Background(), inproc.New(nil, nil), nil, besideRoutes)
	require.NoError(t, err)
	for _, path := range []string{"/v1/messages/batches", "/v1/messages/batches/msgbatch_1/results"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		assert.Equal(t, "error", body.Type, rec.Body.String())
		assert.Equal(t, "not_found_error", body.Error.Type)
		assert.Contains(t, body.Error.Message, path)
	}
}
