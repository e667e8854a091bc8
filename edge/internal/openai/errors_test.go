package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func withDetails(t *testing.T, c codes.Code, msg string, details ...*errdetails.ErrorInfo) *status.Status {
	st := status.New(c, msg)
	for _, d := range details {
		var err error
		st, err = st.WithDetails(d)
		require.NoError(t, err)
	}
	return st
}

func TestFromError(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		typ    string
		code   string
		param  string
	}{
		{"invalid argument with reason", withDetails(t, codes.InvalidArgument, "missing model", &errdetails.ErrorInfo{Reason: "missing_required_parameter", Metadata: map[string]string{"param": "model"}}).Err(),
			400, "invalid_request_error", "missing_required_parameter", "model"},
		{"unauthenticated", withDetails(t, codes.Unauthenticated, "bad key", &errdetails.ErrorInfo{Reason: "invalid_api_key"}).Err(),
			401, "authentication_error", "invalid_api_key", ""},
		{"not found", status.Error(codes.NotFound, "x"), 404, "not_found_error", "not_found", ""},
		{"library message replaced", status.Error(codes.InvalidArgument, "grpc: hunter2 is not valid"), 400, "invalid_request_error", "invalid_request", ""},
		{"undecodable body read without its value", status.Error(codes.InvalidArgument, "proto: syntax error (line 1:2): unexpected token hunter2"), 400, "invalid_request_error", "invalid_type", ""},
		{"undecodable field named without its value", status.Error(codes.InvalidArgument, "proto: (line 1:9): invalid value for string field name: hunter2"), 400, "invalid_request_error", "invalid_type", "name"},
		{"protobuf's other spelling of its prefix", status.Error(codes.InvalidArgument, "proto:\u00a0(line 1:9): invalid value for string field name: hunter2"), 400, "invalid_request_error", "invalid_type", "name"},
		{"message size is not a rate limit", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (99 vs. 10)"), 413, "invalid_request_error", "request_too_large", ""},
		{"rate limited", withDetails(t, codes.ResourceExhausted, "slow down", &errdetails.ErrorInfo{Reason: "rate_limit_exceeded"}).Err(),
			429, "rate_limit_error", "rate_limit_exceeded", ""},
		{"upstream status passed through", withDetails(t, codes.FailedPrecondition, "context too long", &errdetails.ErrorInfo{Reason: "upstream_error", Metadata: map[string]string{"http_status": "422"}}).Err(),
			422, "invalid_request_error", "upstream_error", ""},
		{"internal masked", status.Error(codes.Internal, "pq: password=hunter2"), 500, "server_error", "internal_error", ""},
		{"unavailable", status.Error(codes.Unavailable, "connection refused 10.0.0.1"), 503, "api_error", "service_unavailable", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := FromError(tc.err)
			rec := httptest.NewRecorder()
			p.Write(rec)
			assert.Equal(t, tc.status, rec.Code)
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			assert.Equal(t, tc.typ, body.Error.Type)
			if tc.code == "" {
				assert.Nil(t, body.Error.Code)
			} else {
				require.NotNil(t, body.Error.Code)
				assert.Equal(t, tc.code, *body.Error.Code)
			}
			if tc.param != "" {
				require.NotNil(t, body.Error.Param)
				assert.Equal(t, tc.param, *body.Error.Param)
			}
			assert.NotContains(t, rec.Body.String(), "hunter2")
			assert.NotContains(t, rec.Body.String(), "10.0.0.1")
		})
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	st := status.New(codes.ResourceExhausted, "all rate limited")
	st, err := st.WithDetails(&errdetails.ErrorInfo{Reason: "rate_limit_exceeded"}, &errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	FromError(st.Err()).Write(rec)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "2", rec.Header().Get("Retry-After"))
}

// The message of a {"detail": ...} error body in each shape servers send.
func TestUpstreamDetail(t *testing.T) {
	for body, want := range map[string]string{
		`{"detail":"Unsupported parameter: top_p"}`:                                                        "Unsupported parameter: top_p",
		`{"detail":{"message":"Your account is not allowed to use this model","code":"forbidden"}}`:        "Your account is not allowed to use this model",
		`{"detail":[{"loc":["body","model"],"msg":"field required","type":"missing"},{"msg":"too long"}]}`: "field required; too long",
		`{"detail":null}`:  "",
		`{"error":"x"}`:    "",
		`not json`:         "",
		`{"detail":" x "}`: "x",
	} {
		assert.Equal(t, want, upstreamDetail([]byte(body)), body)
	}
}

// The message of an upstream error body that is no OpenAI error object,
// in each shape servers send.
func TestUpstreamMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"detail":"Unsupported parameter: top_p"}`:                        "Unsupported parameter: top_p",
		`{"error":"Unexpected endpoint or method. (POST /v1/x)"}`:          "Unexpected endpoint or method. (POST /v1/x)",
		`{"object":"error","message":"too long","type":"x","code":400}`:    "too long",
		`{"message":"Unauthorized","request_id":"abc"}`:                    "Unauthorized",
		`{"message":{"detail":[]},"type":"invalid_request_message_error"}`: "",
		`{"error":null}`:    "",
		"model not found\n": "model not found",
		"<html><body><h1>502 Bad Gateway</h1></body></html>": "",
		"":          "",
		`{not json`: "",
		strings.Repeat("x", maxUpstreamMessage+1):         "",
		`{"message":"` + strings.Repeat("x", 2000) + `"}`: "",
	} {
		assert.Equal(t, want, upstreamMessage([]byte(body)), body)
	}
}
