package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An Authorization header the gateway cannot read a key from (no Bearer
// scheme, or another scheme) is refused with 401 invalid_api_key in the
// route's own shape, saying how to send the key and never echoing it,
// unless x-api-key or x-goog-api-key holds the key; a Bearer token in any
// case, an empty one, and the admin routes are served as before.
func TestKeyOutsideBearerIsRefused(t *testing.T) {
	const key = "sk-0123456789abcdef-abc123-0123456789"
	var served bool
	serve := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served = true })
	for _, all := range []bool{false, true} {
		name := "keys optional"
		if all {
			name = "keys required"
		}
		h := cors([]string{"https://app.example"}, nil, checkHeaders(checkKey(all, serve)))
		for _, c := range []struct {
			name, path string
			headers    []string
			// code is the refusal's code (OpenAI's shape) or type
			// (Anthropic's); "" when served.
			code string
		}{
			{"key without a scheme", "/v1/chat/completions", []string{"Authorization", key}, "invalid_api_key"},
			{"Basic credentials", "/v1/chat/completions", []string{"Authorization", "Basic Zm9vOmJhcg=="}, "invalid_api_key"},
			{"scheme glued to the key", "/v1/embeddings", []string{"Authorization", "Bearer" + key}, "invalid_api_key"},
			{"Anthropic's shape", "/v1/messages", []string{"Authorization", key}, "authentication_error"},
			{"legacy path", "/0123456789abcdef/v1/chat/completions", []string{"Authorization", key}, "invalid_api_key"},
			{"allowed page", "/v1/models", []string{"Origin", "https://app.example", "Authorization", key}, "invalid_api_key"},
			{"foreign page", "/v1/models", []string{"Origin", "https://evil.example", "Authorization", key}, "invalid_api_key"},
			{"x-api-key beside another scheme", "/v1/messages", []string{"Authorization", "Basic Zm9vOmJhcg==", "X-Api-Key", key}, ""},
			{"x-goog-api-key beside another scheme", "/v1/chat/completions", []string{"Authorization", "Basic Zm9vOmJhcg==", "X-Goog-Api-Key", key}, ""},
			{"lower case bearer", "/v1/chat/completions", []string{"Authorization", "bearer " + key}, ""},
			{"upper case bearer", "/v1/chat/completions", []string{"Authorization", "BEARER " + key}, ""},
			{"admin route", "/api/keys", []string{"Authorization", key}, ""},
		} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				served = false
				req := httptest.NewRequest(http.MethodPost, c.path, nil)
				for i := 0; i+1 < len(c.headers); i += 2 {
					req.Header.Set(c.headers[i], c.headers[i+1])
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if c.code == "" {
					assert.True(t, served, "%d %s", rec.Code, rec.Body)
					return
				}
				assert.False(t, served)
				assert.Equal(t, http.StatusUnauthorized, rec.Code)
				assert.NotContains(t, rec.Body.String(), "Zm9v", "the credential is not echoed")
				assert.NotContains(t, rec.Body.String(), key, "the key is not echoed")
				var body struct {
					Type  string `json:"type"`
					Error struct{ Message, Type, Code string }
				}
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
				if c.code == "authentication_error" {
					assert.Equal(t, "error", body.Type, rec.Body.String())
					assert.Equal(t, c.code, body.Error.Type)
				} else {
					assert.Equal(t, c.code, body.Error.Code, rec.Body.String())
				}
				assert.Contains(t, body.Error.Message, "Authorization: Bearer <key>")
				assert.Contains(t, body.Error.Message, "x-api-key")
			})
		}
	}

	// An empty Bearer token is no key: served when keys are not required,
	// missing_api_key when they are.
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer")
	served = false
	checkKey(false, serve).ServeHTTP(httptest.NewRecorder(), req)
	assert.True(t, served, "an empty Bearer token runs keyless")
	rec := httptest.NewRecorder()
	checkKey(true, serve).ServeHTTP(rec, req)
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Contains(t, rec.Body.String(), `"code":"missing_api_key"`)
}

// A request without a key where one is required is told where to send
// it: on the Messages routes (Anthropic's clients send x-api-key) the
// answer names x-api-key, and every route names Authorization: Bearer.
func TestMissingKeyNamesTheKeyHeaders(t *testing.T) {
	h := checkKey(true, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("served without a key") }))
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions", "/0123456789abcdef/v1/embeddings"} {
		t.Run(path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
			assert.Equal(t, http.StatusUnauthorized, rec.Code)
			var body struct {
				Error struct{ Message, Type, Code string }
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
			assert.Contains(t, body.Error.Message, "x-api-key", rec.Body.String())
			assert.Contains(t, body.Error.Message, "Authorization: Bearer <key>")
		})
	}
}
