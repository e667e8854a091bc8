package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/inproc"
)

// A query parameter or body field the gateway cannot decode is named, with
// what it must be, as core names the ones it refuses (limit=1000: "limit
// must be 1 to 500"); a body that is not JSON says so. Neither echoes the
// value sent.
func TestUndecodableParametersAreNamed(t *testing.T) {
	mux, err := New(context.Background(), inproc.New(nil, nil), nil, nil)
	require.NoError(t, err)
	for _, c := range []struct {
		method, path, body string
		code, param, msg   string
	}{
		{"GET", "/api/usage/requests?since=2026-11-25", "", "invalid_value", "since", "since must be an RFC 3339 time"},
		{"GET", "/api/usage/requests?until=", "", "invalid_value", "until", "until must be an RFC 3339 time"},
		{"GET", "/api/usage/requests?limit=abc", "", "invalid_value", "limit", "limit must be an integer"},
		{"GET", "/api/usage/requests?limit=99999999999", "", "invalid_value", "limit", "limit is out of range"},
		{"GET", "/api/usage/requests?limit=1&limit=2", "", "invalid_value", "limit", "limit must be given once"},
		{"POST", "/api/console/sign-in", "xx", "invalid_json", "", "the request body is not valid JSON"},
		{"POST", "/api/console/sign-in", `{"code": "a"`, "invalid_json", "", "the request body is not valid JSON"},
		{"POST", "/api/console/sign-in", `["secret"]`, "invalid_json", "", "the request body must be a JSON object"},
		{"POST", "/api/console/sign-in", `{"code": "a"} x`, "invalid_json", "", "the request body is not valid JSON"},
		{"POST", "/api/console/sign-in", `{"code": "a"}]`, "invalid_json", "", "the request body is not valid JSON"},
		{"POST", "/api/console/sign-in", "{\"code\": \"a\"}\n{\"code\": \"secret\"}", "invalid_json", "", "the request body is not valid JSON"},
		{"PATCH", "/api/settings", `{"stickyLimit": 2} {`, "invalid_json", "", "the request body is not valid JSON"},
		{"POST", "/api/console/sign-in", `{"code": 5}`, "invalid_type", "code", "code must be a string"},
		{"PATCH", "/api/settings", `{"stickyLimit": "secret"}`, "invalid_type", "stickyLimit", "stickyLimit must be a 32-bit integer"},
		{"PATCH", "/api/settings", `{"requireApiKey": "secret"}`, "invalid_type", "requireApiKey", "requireApiKey must be a boolean"},
		{"POST", "/api/providers", `{"name": "a", "name": "b"}`, "invalid_value", "name", "name is given more than once"},
		{"POST", "/api/models/disabled", `{"ids": "secret"}`, "invalid_type", "ids", "ids must be a list of strings"},
		{"PUT", "/api/models/aliases", `{"aliases": "secret"}`, "invalid_type", "aliases", "aliases must be an object of strings"},
		{"PUT", "/api/models/aliases", `{"aliases": {"a": 5}}`, "invalid_type", "aliases", "aliases must be an object of strings"},
		{"PUT", "/api/models/combos", `{"combos": {"a": "secret"}}`, "invalid_type", "combos", "combos must be a list of objects"},
		{"PUT", "/api/models/combos", `{"combos": ["secret"]}`, "invalid_type", "combos[0]", "combos[0] must be an object"},
		{"PUT", "/api/models/combos", `{"combos": [{"name": "a", "models": ["b"]}, {"name": "c", "models": "secret"}]}`,
			"invalid_type", "combos[1].models", "combos[1].models must be a list of strings"},
		{"PUT", "/api/models/combos", "{\"combos\": [\n {\"name\": \"é\", \"models\": [5]}]}", "invalid_type", "combos[0].models[0]", "combos[0].models[0] must be a string"},
		{"POST", "/api/providers", `{"providerSpecificData": "secret"}`, "invalid_type", "providerSpecificData", "providerSpecificData must be an object"},
		{"POST", "/api/providers", `{"providerSpecificData": {"prefix": 5}}`, "invalid_type", "providerSpecificData.prefix", "providerSpecificData.prefix must be a string"},
		{"PATCH", "/api/providers/x", `{"providerSpecificData": {"enabledModels": "secret"}}`,
			"invalid_type", "providerSpecificData.enabledModels", "providerSpecificData.enabledModels must be a list"},
	} {
		t.Run(c.method+" "+c.path+" "+c.body, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
			require.Equal(t, 400, rec.Code, rec.Body.String())
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Code    string  `json:"code"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
			assert.Equal(t, c.code, body.Error.Code)
			assert.Contains(t, body.Error.Message, c.msg)
			if c.param == "" {
				assert.Nil(t, body.Error.Param)
			} else if assert.NotNil(t, body.Error.Param) {
				assert.Equal(t, c.param, *body.Error.Param)
			}
			assert.NotContains(t, rec.Body.String(), "secret")
		})
	}
}
