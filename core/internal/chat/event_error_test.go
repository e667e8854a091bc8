package chat

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/internal/provider"
)

// Errors upstreams report in their streams, as they send them.
const (
	// OpenAI's, in a chunk (OpenRouter answers a 200 and sends these).
	contextTooLongChunk = `{"error":{"message":"This endpoint's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded","param":null}}`
	rateLimitedChunk    = `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded","param":null}}`
	// OpenRouter's, whose code is the HTTP status.
	numericCodeChunk = `{"error":{"code":429,"message":"Rate limit exceeded: free-models-per-day"}}`

	// Anthropic's error event.
	overloadedEvent = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	anthropicStart  = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"

	// The Responses API's error event and response.failed.
	responsesRateLimited = `{"type":"error","sequence_number":0,"code":"rate_limit_exceeded","message":"Rate limit reached for requests","param":null}`
	responsesStart       = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"status\":\"in_progress\",\"model\":\"m\",\"output\":[]}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\"}\n\n"
	responsesContextTooLong = `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","object":"response","created_at":1,"status":"failed","model":"m","output":[],` +
		`"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model."}}}`
)

var (
	chatUpstream      = provider.Spec{Format: provider.FormatOpenAI}
	anthropicUpstream = provider.Spec{Format: provider.FormatAnthropic}
	responsesUpstream = provider.Spec{Format: provider.FormatResponses}
)

// clientError is what a client reads of an error body: OpenAI's
// {"error":{"message","type","code"}} or Anthropic's
// {"type":"error","error":{"type","message"}}.
type clientError struct {
	Anthropic           bool
	Type, Code, Message string
}

func readClientError(t *testing.T, body []byte) clientError {
	t.Helper()
	var b struct {
		Type  string `json:"type"`
		Error struct {
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &b), "%s", body)
	e := clientError{Anthropic: b.Type == "error", Type: b.Error.Type, Message: b.Error.Message}
	if len(b.Error.Code) > 0 && string(b.Error.Code) != "null" {
		var s string
		if json.Unmarshal(b.Error.Code, &s) != nil {
			s = string(b.Error.Code) // OpenRouter's number
		}
		e.Code = s
	}
	return e
}

// An error an upstream sends as its stream's first event is a failed
// attempt with the status it stands for, on every route as on the chat
// pass-through: a client error (context too long) goes back to the client
// as its 400, never retried on another connection, and a rate limit or an
// overload cools the connection and falls over. Its body is what the same
// error answered as a status would bring on the route: OpenAI's shape for
// chat and Responses clients (Anthropic's type kept as the code), the
// upstream's own for /v1/messages (the edge renders an OpenAI one in
// Anthropic's shape by its status, as it does error answers).
func TestAnUpstreamStreamErrorBeforeTheFirstEventKeepsItsStatus(t *testing.T) {
	openAIContextTooLong := clientError{Type: "invalid_request_error", Code: "context_length_exceeded", Message: "This endpoint's maximum context length is 8192 tokens"}
	openAINumeric := clientError{Code: "429", Message: "Rate limit exceeded: free-models-per-day"}
	overloadedAsOpenAI := clientError{Type: "server_error", Code: "overloaded_error", Message: "Overloaded"}
	overloaded := clientError{Anthropic: true, Type: "overloaded_error", Message: "Overloaded"}
	responsesRateLimit := clientError{Type: "invalid_request_error", Code: "rate_limit_exceeded", Message: "Rate limit reached for requests"}
	for _, tc := range []struct {
		name     string
		client   Dialect
		upstream provider.Spec
		stream   string
		status   int
		want     clientError
	}{
		{"chat over chat", DialectChat, chatUpstream, sseOf(contextTooLongChunk), http.StatusBadRequest, openAIContextTooLong},
		{"messages over chat", DialectMessages, chatUpstream, sseOf(contextTooLongChunk), http.StatusBadRequest, openAIContextTooLong},
		{"responses over chat", DialectResponses, chatUpstream, sseOf(contextTooLongChunk), http.StatusBadRequest, openAIContextTooLong},
		{"messages over chat, a numeric code", DialectMessages, chatUpstream, sseOf(numericCodeChunk), http.StatusTooManyRequests, openAINumeric},
		{"responses over chat, a numeric code", DialectResponses, chatUpstream, sseOf(numericCodeChunk), http.StatusTooManyRequests, openAINumeric},

		{"messages over anthropic", DialectMessages, anthropicUpstream, "event: error\ndata: " + overloadedEvent + "\n\n", 529, overloaded},
		{"chat over anthropic", DialectChat, anthropicUpstream, "event: error\ndata: " + overloadedEvent + "\n\n", 529, overloadedAsOpenAI},
		{"chat over anthropic, an unnamed event", DialectChat, anthropicUpstream, sseOf(overloadedEvent), 529, overloadedAsOpenAI},
		{"responses over anthropic", DialectResponses, anthropicUpstream, "event: error\ndata: " + overloadedEvent + "\n\n", 529, overloadedAsOpenAI},

		{"responses over responses", DialectResponses, responsesUpstream, "event: error\ndata: " + responsesRateLimited + "\n\n", http.StatusTooManyRequests, responsesRateLimit},
		{"chat over responses", DialectChat, responsesUpstream, "event: error\ndata: " + responsesRateLimited + "\n\n", http.StatusTooManyRequests, responsesRateLimit},
		{"messages over responses", DialectMessages, responsesUpstream, "event: error\ndata: " + responsesRateLimited + "\n\n", http.StatusTooManyRequests, responsesRateLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newBatchRecorder()
			_, a, err := streamAs(t, tc.client, tc.upstream, sink, strings.NewReader(tc.stream))
			require.Error(t, err)
			require.False(t, a.sent, "nothing reached the client")
			require.False(t, credential.IsCommitted(err), "another connection may answer")
			var up *credential.UpstreamError
			require.True(t, errors.As(err, &up), "%T %v", err, err)
			assert.Equal(t, tc.status, up.Status, "%s", up.Body)
			assert.Equal(t, tc.want, readClientError(t, up.Body))
			assert.Empty(t, sink.snapshot())
		})
	}
}

// An error an upstream sends after the stream started reaches the client
// in band with the upstream's type and code, in the client's dialect:
// agents act on them (Claude Code retries an overloaded_error, Codex
// compacts on context_length_exceeded, clients back off on a rate limit).
// A chat or Responses client gets an OpenAI error object (Anthropic's type
// as its code; the Responses route makes it response.failed's error); a
// /v1/messages client gets Anthropic's error event, with the Anthropic
// type an OpenAI code stands for.
func TestAnUpstreamStreamErrorAfterTheFirstEventReachesTheClientInItsDialect(t *testing.T) {
	rateLimited := clientError{Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached for requests"}
	overloadedAsOpenAI := clientError{Type: "server_error", Code: "overloaded_error", Message: "Overloaded"}
	responsesContext := clientError{Type: "invalid_request_error", Code: "context_length_exceeded", Message: "Your input exceeds the context window of this model."}
	for _, tc := range []struct {
		name     string
		client   Dialect
		upstream provider.Spec
		stream   string
		want     clientError
	}{
		{"chat over chat", DialectChat, chatUpstream, sseOf(chunk("hello"), rateLimitedChunk), rateLimited},
		{"responses over chat", DialectResponses, chatUpstream, sseOf(chunk("hello"), rateLimitedChunk), rateLimited},
		{"messages over chat", DialectMessages, chatUpstream, sseOf(chunk("hello"), rateLimitedChunk),
			clientError{Anthropic: true, Type: "rate_limit_error", Message: "Rate limit reached for requests"}},
		{"messages over chat, context too long", DialectMessages, chatUpstream, sseOf(chunk("hello"), contextTooLongChunk),
			clientError{Anthropic: true, Type: "invalid_request_error", Message: "This endpoint's maximum context length is 8192 tokens"}},
		{"messages over chat, a numeric code", DialectMessages, chatUpstream, sseOf(chunk("hello"), numericCodeChunk),
			clientError{Anthropic: true, Type: "rate_limit_error", Message: "Rate limit exceeded: free-models-per-day"}},

		{"messages over anthropic", DialectMessages, anthropicUpstream, anthropicStart + "event: error\ndata: " + overloadedEvent + "\n\n",
			clientError{Anthropic: true, Type: "overloaded_error", Message: "Overloaded"}},
		{"chat over anthropic", DialectChat, anthropicUpstream, anthropicStart + "event: error\ndata: " + overloadedEvent + "\n\n", overloadedAsOpenAI},
		{"responses over anthropic", DialectResponses, anthropicUpstream, anthropicStart + "event: error\ndata: " + overloadedEvent + "\n\n", overloadedAsOpenAI},

		{"responses over responses", DialectResponses, responsesUpstream, responsesStart + "event: response.failed\ndata: " + responsesContextTooLong + "\n\n", responsesContext},
		{"chat over responses", DialectChat, responsesUpstream, responsesStart + "event: response.failed\ndata: " + responsesContextTooLong + "\n\n", responsesContext},
		{"messages over responses", DialectMessages, responsesUpstream, responsesStart + "event: response.failed\ndata: " + responsesContextTooLong + "\n\n",
			clientError{Anthropic: true, Type: "invalid_request_error", Message: "Your input exceeds the context window of this model."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newBatchRecorder()
			_, a, err := streamAs(t, tc.client, tc.upstream, sink, strings.NewReader(tc.stream))
			require.Error(t, err)
			require.True(t, a.sent, "the stream started")
			require.True(t, credential.IsCommitted(err))
			var se *credential.StreamError
			require.True(t, errors.As(err, &se), "%T %v", err, err)
			require.NotEmpty(t, se.Body, "the upstream's error, not the gateway's %q: %q", se.Code, se.Message)
			assert.Equal(t, tc.want, readClientError(t, se.Body))
			assert.NotEmpty(t, sink.snapshot(), "what came before the error was relayed")
		})
	}
}

// A chunk that only names an error (a null error member, the word in its
// text) is relayed as any other on the translated routes.
func TestTranslatedStreamsRelayAChunkThatOnlyNamesAnError(t *testing.T) {
	nullError := `{"id":"c","object":"chat.completion.chunk","error":null,"choices":[{"index":0,"delta":{"content":"an \"error\""}}]}`
	for _, d := range []Dialect{DialectMessages, DialectResponses} {
		t.Run(d.String(), func(t *testing.T) {
			_, _, err := streamAs(t, d, chatUpstream, newBatchRecorder(), strings.NewReader(sseOf(nullError, finish, "[DONE]")))
			require.NoError(t, err)
		})
	}
}

// An error an upstream sends after the stream started is judged as the
// answer it stands for, not as a network failure: a refused prompt (OpenAI's
// invalid_prompt, a context too long) is the request's own fault and cools
// nothing, a rate limit is a rate limit, an overload or a server error is
// the server's. The client still gets the upstream's error in-band.
func TestAnUpstreamStreamErrorAfterTheFirstEventIsClassifiedAsItsAnswer(t *testing.T) {
	const refused = `{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy.","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}`
	const serverError = `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":"server_error"}}`
	for _, tc := range []struct {
		name     string
		client   Dialect
		upstream provider.Spec
		stream   string
		reason   credential.Reason
		status   int
	}{
		{"chat over chat, a refused prompt", DialectChat, chatUpstream, sseOf(chunk("Sure"), refused), credential.ReasonClient, http.StatusBadRequest},
		{"messages over chat, a refused prompt", DialectMessages, chatUpstream, sseOf(chunk("Sure"), refused), credential.ReasonClient, http.StatusBadRequest},
		{"responses over chat, context too long", DialectResponses, chatUpstream, sseOf(chunk("hello"), contextTooLongChunk), credential.ReasonClient, http.StatusBadRequest},
		{"chat over chat, rate limited", DialectChat, chatUpstream, sseOf(chunk("hello"), rateLimitedChunk), credential.ReasonRateLimited, http.StatusTooManyRequests},
		{"messages over chat, a numeric code", DialectMessages, chatUpstream, sseOf(chunk("hello"), numericCodeChunk), credential.ReasonRateLimited, http.StatusTooManyRequests},
		{"chat over chat, a server error", DialectChat, chatUpstream, sseOf(chunk("hello"), serverError), credential.ReasonServer, http.StatusInternalServerError},
		{"chat over anthropic, overloaded", DialectChat, anthropicUpstream, anthropicStart + "event: error\ndata: " + overloadedEvent + "\n\n", credential.ReasonServer, 529},
		{"messages over anthropic, overloaded", DialectMessages, anthropicUpstream, anthropicStart + "event: error\ndata: " + overloadedEvent + "\n\n", credential.ReasonServer, 529},
		{"responses over responses, context too long", DialectResponses, responsesUpstream, responsesStart + "event: response.failed\ndata: " + responsesContextTooLong + "\n\n", credential.ReasonClient, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, a, err := streamAs(t, tc.client, tc.upstream, newBatchRecorder(), strings.NewReader(tc.stream))
			require.Error(t, err)
			require.True(t, a.sent, "the stream started")
			var se *credential.StreamError
			require.True(t, errors.As(err, &se), "%T %v", err, err)
			require.NotEmpty(t, se.Body, "the client gets the upstream's error")

			f := credential.Classify(err, time.Now())
			assert.True(t, f.Committed)
			assert.Equal(t, tc.reason, f.Reason)
			assert.Equal(t, tc.status, f.Status)
			if tc.reason == credential.ReasonClient {
				assert.False(t, f.Fallback, "the request's own fault: no cooldown")
				assert.Zero(t, f.Cooldown)
			} else {
				assert.NotEqual(t, credential.ReasonNetwork, f.Reason)
			}
			if tc.reason == credential.ReasonRateLimited {
				assert.Equal(t, credential.BaseBackoff, f.Cooldown, "the rate-limit backoff, not the 30 s of a network failure")
			}
		})
	}
}
