package embeddings

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
)

// An answer that does not hold one vector per input (OpenRouter answers
// token-id input with an empty data list and a 200) is the upstream's
// fault: a 502 the next connection may answer, never a success whose
// vectors the client would pair with the wrong inputs or not find.
func TestAnswerHoldsOneVectorPerInput(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		req        Request
		format     string
		asJSON     bool
		ok         bool
	}{
		{"empty data, tokens", `{"object":"list","data":[],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`,
			Request{Tokens: [][]int64{{1, 2}, {3}}}, FormatBase64, true, false},
		{"one of two, passed through", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,1]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`,
			Request{Texts: []string{"a", "b"}}, FormatFloat, true, false},
		{"one of two, re-encoded", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,1]}],"model":"m"}`,
			Request{Texts: []string{"a", "b"}}, FormatBase64, true, false},
		{"one of two, vectors", `{"data":[{"index":0,"embedding":[0.5,1]}],"model":"m"}`,
			Request{Texts: []string{"a", "b"}}, FormatFloat, false, false},
		{"three of two", `{"data":[{"index":0,"embedding":[0.5]},{"index":1,"embedding":[1]},{"index":2,"embedding":[2]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`,
			Request{Texts: []string{"a", "b"}}, FormatFloat, true, false},
		{"two of two", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,1]},{"object":"embedding","index":1,"embedding":[1,2]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`,
			Request{Texts: []string{"a", "b"}}, FormatFloat, true, true},
		{"two of two, without indexes", `{"data":[{"embedding":[0.5,1]},{"embedding":[1,2]}],"model":"m"}`,
			Request{Texts: []string{"a", "b"}}, FormatFloat, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(up.Close)
			s := New(nil, Options{})
			c := &dispatch.Conn{BaseURL: up.URL, Client: up.Client()}
			var out Response
			err := s.attempt(context.Background(), c, appendRequest(nil, "m", &tt.req, tt.format), tt.format, tt.asJSON, inputs(&tt.req), &out)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			var ue *credential.UpstreamError
			require.True(t, errors.As(err, &ue), "a failed attempt, not a success: %v (body %s)", err, out.Body)
			assert.Equal(t, http.StatusBadGateway, ue.Status)
			assert.Contains(t, string(ue.Body), "bad_upstream_response")
		})
	}
}

// An error answered with a 200 (OpenRouter does, its code the status it
// stands for) is a failed attempt with that status and the upstream's
// error, as chat has it: a rate limit cools the connection as one and the
// client reads the upstream's message, where any such answer was a 502
// that named nothing.
func TestErrorAnsweredWithOK(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		status     int
	}{
		{"numeric code", `{"error":{"message":"Rate limit exceeded: free-models-per-min","code":429}}`, http.StatusTooManyRequests},
		{"string code", `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, http.StatusTooManyRequests},
		{"client's fault", `{"error":{"message":"Input must not be empty","code":400}}`, http.StatusBadRequest},
		{"no code", `{"error":{"message":"No successful provider responses."}}`, http.StatusBadGateway},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(up.Close)
			s := New(nil, Options{})
			c := &dispatch.Conn{BaseURL: up.URL, Client: up.Client()}
			req := Request{Texts: []string{"a"}}
			var out Response
			err := s.attempt(context.Background(), c, appendRequest(nil, "m", &req, FormatFloat), FormatFloat, true, 1, &out)
			var ue *credential.UpstreamError
			require.True(t, errors.As(err, &ue), "a failed attempt: %v", err)
			assert.Equal(t, tt.status, ue.Status)
			var body struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(ue.Body, &body), "%s", ue.Body)
			assert.Contains(t, tt.body, body.Error.Message, "the upstream's message")
			assert.NotEmpty(t, body.Error.Message)
		})
	}
}
