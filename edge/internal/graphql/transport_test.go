package graphql

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/edge/internal/userauth"
)

// TestTransportErrorsAreClientErrors sends malformed GraphQL requests: each
// is a 4xx with its own code, and the log never holds the body.
func TestTransportErrorsAreClientErrors(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(NewHandler(failingBilling{status.Error(codes.Internal, "x")}, userauth.New(userauth.Config{Secret: secret}), log))
	defer srv.Close()
	const marker = "SECRET-MARKER-sk_live_123"

	deep := strings.Repeat(`{"a":`, 100) + `"` + marker + `"` + strings.Repeat("}", 100)
	aliased := func(n int) string {
		var q strings.Builder
		q.WriteString("{")
		for i := range n {
			q.WriteString(" a" + strconv.Itoa(i) + ": prices { plan }")
		}
		q.WriteString("}")
		b, _ := json.Marshal(map[string]any{"query": q.String()})
		return string(b)
	}
	batch := "[" + strings.Repeat(`{"query":"{ prices { plan } }"},`, 999) + `{"query":"{ prices { plan } }"}]`
	cases := []struct {
		name, ct, body string
		status         int
		code           string
	}{
		{"oversized", "application/json", `{"query":"` + marker + strings.Repeat("x", MaxBodyBytes) + `"}`, 413, CodeRequestTooLarge},
		{"truncated", "application/json", `{"query":"{ prices { plan } }", "variables": {"x":"` + marker, 400, CodeBadRequest},
		{"invalid utf-8", "application/json", "{\"query\":\"{ prices { plan } }\",\"x\":\"\xff\xfe" + marker + "\"}", 400, CodeBadRequest},
		{"batch", "application/json", batch, 400, CodeBatchNotSupported},
		{"deep variables", "application/json", `{"query":"{ prices { plan } }","variables":` + deep + `}`, 400, CodeBadRequest},
		{"not json", "text/plain", `{"query":"{ prices { plan } }"}`, 415, CodeUnsupportedMedia},
		{"wrong member type", "application/json", `{"query":5,"x":"` + marker + `"}`, 400, CodeBadRequest},
		{"hundreds of aliases", "application/json", aliased(600), 422, "COMPLEXITY_LIMIT_EXCEEDED"},
		{"thousands of aliases", "application/json", aliased(5000), 422, "GRAPHQL_PARSE_FAILED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL, tc.ct, strings.NewReader(tc.body))
			require.NoError(t, err)
			defer resp.Body.Close()
			var out struct {
				Errors []struct {
					Message    string         `json:"message"`
					Extensions map[string]any `json:"extensions"`
				} `json:"errors"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			require.NotEmpty(t, out.Errors)
			assert.Equal(t, tc.code, out.Errors[0].Extensions["code"], out.Errors[0].Message)
			if tc.status != 422 {
				assert.Equal(t, tc.status, resp.StatusCode)
			} else {
				assert.GreaterOrEqual(t, resp.StatusCode, 400)
				assert.Less(t, resp.StatusCode, 500)
			}
			assert.NotContains(t, out.Errors[0].Message, marker)
		})
	}
	assert.NotContains(t, logs.String(), marker, "request bodies are never logged")
	assert.NotContains(t, logs.String(), "level=ERROR")
}

// TestIntrospectionNeedsAUser: anonymous introspection is refused unless
// the listener is loopback; a signed-in user may introspect.
func TestIntrospectionNeedsAUser(t *testing.T) {
	v := userauth.New(userauth.Config{Secret: secret})
	closed := httptest.NewServer(NewHandler(failingBilling{status.Error(codes.Internal, "x")}, v, slog.New(slog.DiscardHandler)))
	defer closed.Close()
	open := httptest.NewServer(NewHandlerWith(failingBilling{status.Error(codes.Internal, "x")}, v, slog.New(slog.DiscardHandler), Options{OpenIntrospection: true}))
	defer open.Close()
	tok, err := userauth.Mint(secret, "u1", "", time.Hour)
	require.NoError(t, err)
	const q = `{ __schema { queryType { name } } }`

	anon := post(t, closed.URL, "", q)
	require.NotEmpty(t, anon["errors"], "anonymous introspection refused: %v", anon)
	if data, ok := anon["data"].(map[string]any); ok {
		assert.Nil(t, data["__schema"])
	}

	for name, out := range map[string]map[string]any{"signed in": post(t, closed.URL, tok, q), "loopback": post(t, open.URL, "", q)} {
		require.Empty(t, out["errors"], name)
		assert.Equal(t, "Query", out["data"].(map[string]any)["__schema"].(map[string]any)["queryType"].(map[string]any)["name"], name)
	}
}

// TestOperationErrorsCarryTheirStatus: an operation GraphQL refuses before
// it runs (not parsable, not valid against the schema, a variable of the
// wrong type, over a limit) answers errors with extensions { code, status },
// the status the response carries, as every other error does.
func TestOperationErrorsCarryTheirStatus(t *testing.T) {
	srv := httptest.NewServer(NewHandler(failingBilling{status.Error(codes.Internal, "x")}, userauth.New(userauth.Config{Secret: secret}), slog.New(slog.DiscardHandler)))
	defer srv.Close()
	tok, err := userauth.Mint(secret, "u1", "", time.Hour)
	require.NoError(t, err)
	var aliases strings.Builder
	aliases.WriteString("{")
	for i := range 600 {
		aliases.WriteString(" a" + strconv.Itoa(i) + ": prices { plan }")
	}
	aliases.WriteString("}")
	cases := []struct {
		name, query string
		vars        map[string]any
		code        string
	}{
		{"not parsable", `query { currentUser { id }`, nil, "GRAPHQL_PARSE_FAILED"},
		{"unknown field", `{ currentUser { nope } }`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{"unknown enum value", `mutation { checkout(recurring: Weekly) }`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{"variable of the wrong value", `mutation($r: SubscriptionRecurring!) { checkout(recurring: $r) }`, map[string]any{"r": "Weekly"}, "GRAPHQL_VALIDATION_FAILED"},
		{"variable missing", `mutation($r: SubscriptionRecurring!) { checkout(recurring: $r) }`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{"two mutations", `mutation { a: createCustomerPortal b: createCustomerPortal }`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{"too complex", aliases.String(), nil, "COMPLEXITY_LIMIT_EXCEEDED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"query": tc.query, "variables": tc.vars})
			req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var out struct {
				Errors []struct {
					Message    string         `json:"message"`
					Extensions map[string]any `json:"extensions"`
				} `json:"errors"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			require.NotEmpty(t, out.Errors)
			assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
			for _, e := range out.Errors {
				assert.Equal(t, tc.code, e.Extensions["code"], e.Message)
				assert.EqualValues(t, resp.StatusCode, e.Extensions["status"], "%s: %v", e.Message, e.Extensions)
			}
		})
	}
}
