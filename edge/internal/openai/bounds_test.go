package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonList is a JSON array of n copies of item.
func jsonList(item string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
}

// A list over its bound is answered, on every OpenAI route, with OpenAI's
// code, wording and param for an array too long; the Messages routes keep
// Anthropic's shape, without a code, and say the same.
func TestOverLongListsAnswerOpenAIsCode(t *testing.T) {
	msg := `{"role":"user","content":"hi"}`
	router := newFakeRouter(t, &fakeRouter{})
	for _, tc := range []struct {
		name, path string
		h          http.Handler
		body       string
		param      string
		message    string
	}{
		{"chat stop", "/v1/chat/completions", &Chat{Router: router},
			`{"model":"m","messages":[` + msg + `],"stop":["a","b","c","d","e"]}`,
			"stop", "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length 5 instead."},
		{"chat tools", "/v1/chat/completions", &Chat{Router: router},
			`{"model":"m","messages":[` + msg + `],"tools":` + jsonList(`{}`, 150) + `}`,
			"tools", "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 150 instead."},
		{"chat functions", "/v1/chat/completions", &Chat{Router: router},
			`{"model":"m","messages":[` + msg + `],"functions":` + jsonList(`{}`, 129) + `}`,
			"functions", "Invalid 'functions': array too long. Expected an array with maximum length 128, but got an array with length 129 instead."},
		{"chat messages", "/v1/chat/completions", &Chat{Router: router},
			`{"model":"m","messages":` + jsonList(msg, MaxChatMessages+2) + `}`,
			"messages", "Invalid 'messages': array too long. Expected an array with maximum length 10000, but got an array with length 10002 instead."},
		{"responses tools", "/v1/responses", &Responses{Router: router},
			`{"model":"m","input":"hi","tools":` + jsonList(`{}`, 129) + `}`,
			"tools", "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 129 instead."},
		{"responses input", "/v1/responses", &Responses{Router: router},
			`{"model":"m","input":` + jsonList(msg, MaxResponsesInput+1) + `}`,
			"input", "Invalid 'input': array too long. Expected an array with maximum length 10000, but got an array with length 10001 instead."},
		{"embeddings input", "/v1/embeddings", &Embeddings{Router: router},
			`{"model":"m","input":` + jsonList(`"a"`, 2100) + `}`,
			"input", "Invalid 'input': array too long. Expected an array with maximum length 2048, but got an array with length 2100 instead."},
		{"embeddings token ids", "/v1/embeddings", &Embeddings{Router: router},
			`{"model":"m","input":` + jsonList(`1`, 3000) + `}`,
			"input", "Invalid 'input': array too long. Expected an array with maximum length 2048, but got an array with length 3000 instead."},
		{"embeddings token array", "/v1/embeddings", &Embeddings{Router: router},
			`{"model":"m","input":[[1],` + jsonList(`1`, MaxEmbeddingTokens+3) + `]}`,
			"input[1]", "Invalid 'input[1]': array too long. Expected an array with maximum length 65536, but got an array with length 65539 instead."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, r)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			var b ErrorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), w.Body.String())
			require.NotNil(t, b.Error.Code, w.Body.String())
			assert.Equal(t, "array_above_max_length", *b.Error.Code)
			assert.Equal(t, "invalid_request_error", b.Error.Type)
			require.NotNil(t, b.Error.Param, w.Body.String())
			assert.Equal(t, tc.param, *b.Error.Param)
			assert.Equal(t, tc.message, b.Error.Message)
		})
	}

	t.Run("transcription fields", func(t *testing.T) {
		h := &Transcriptions{Router: router}
		ct, body := form(t, append([][2]string{{"model", "m"}, {"file", "a"}}, slices.Repeat([][2]string{{"include[]", "logprobs"}}, 65)...)...)
		r := httptest.NewRequest(http.MethodPost, "/v1/audio/transcriptions", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
		var b ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), w.Body.String())
		require.NotNil(t, b.Error.Code, w.Body.String())
		assert.Equal(t, "array_above_max_length", *b.Error.Code)
		assert.Equal(t, "the form holds more than 64 fields the gateway does not read", b.Error.Message)
	})

	for _, tc := range []struct {
		name, path string
		h          http.Handler
		body       string
		message    string
	}{
		{"messages stop_sequences", "/v1/messages", &Messages{Router: router},
			`{"model":"m","max_tokens":5,"messages":[` + msg + `],"stop_sequences":` + jsonList(`"s"`, MaxMessagesStop+1) + `}`,
			"Invalid 'stop_sequences': array too long. Expected an array with maximum length 256, but got an array with length 257 instead."},
		{"count_tokens tools", "/v1/messages/count_tokens", &CountTokens{Router: router},
			`{"model":"m","messages":[` + msg + `],"tools":` + jsonList(`{}`, MaxMessagesTools+1) + `}`,
			"Invalid 'tools': array too long. Expected an array with maximum length 1024, but got an array with length 1025 instead."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, r)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			var b map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), w.Body.String())
			assert.Equal(t, map[string]any{"type": "error", "error": map[string]any{
				"type": "invalid_request_error", "message": tc.message}}, b, "Anthropic's shape, no code")
		})
	}
}

// A chat request with no messages in its list is answered as OpenAI
// answers it: empty_array, in its words.
func TestEmptyMessagesAnswerOpenAIsCode(t *testing.T) {
	h := &Chat{Router: newFakeRouter(t, &fakeRouter{})}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[ ]}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.JSONEq(t, `{"error":{"code":"empty_array","param":"messages","type":"invalid_request_error",
		"message":"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."}}`, w.Body.String())
}

// A chat request whose n is past its bounds is answered as OpenAI answers
// it: the bound crossed, in its code and words, with the value it got.
func TestChatNOutOfRangeAnswersOpenAIsCode(t *testing.T) {
	h := &Chat{Router: newFakeRouter(t, &fakeRouter{})}
	for _, tc := range []struct {
		n, code, message string
	}{
		{"130", "integer_above_max_value", "Invalid 'n': integer above maximum value. Expected a value <= 128, but got 130 instead."},
		{"0", "integer_below_min_value", "Invalid 'n': integer below minimum value. Expected a value >= 1, but got 0 instead."},
		{"-3", "integer_below_min_value", "Invalid 'n': integer below minimum value. Expected a value >= 1, but got -3 instead."},
		{`"2"`, "invalid_value", "'n' must be an integer from 1 to 128"},
	} {
		t.Run(tc.n, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":`+tc.n+`}`))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			var b ErrorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), w.Body.String())
			require.NotNil(t, b.Error.Code, w.Body.String())
			assert.Equal(t, tc.code, *b.Error.Code)
			assert.Equal(t, "n", *b.Error.Param)
			assert.Equal(t, tc.message, b.Error.Message)
		})
	}
}
