package node_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// An error an upstream reports inside its stream reaches the client as the
// upstream said it, on a pass-through: agents act on its type and code
// (Claude Code retries an overloaded_error, Codex compacts on
// context_length_exceeded), which a generic "the upstream reported an
// error" hid. Before anything reached the client it is a failed attempt
// with the status the error stands for, so an overloaded primary gives way
// to the fallback.
func TestUpstreamStreamErrorsPassThrough(t *testing.T) {
	const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	const messageStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`
	anthropicPair := func(t *testing.T) (*nodetest.Instance, string, *upstreamtest.Server, *upstreamtest.Server) {
		sb := nodetest.Serve(t, t.TempDir())
		primary := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant-1"))
		fallback := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant-2"))
		for i, up := range []*upstreamtest.Server{primary, fallback} {
			sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-x", "name": []string{"p", "f"}[i],
				"apiKey": []string{"sk-ant-1", "sk-ant-2"}[i], "priority": i + 1,
				"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "ac", "enabledModels": []string{"claude-x"}}})
		}
		return sb, gatewayKey(t, sb), primary, fallback
	}

	t.Run("messages, mid-stream", func(t *testing.T) {
		sb, key, primary, fallback := anthropicPair(t)
		primary.Enqueue(pathMessages, upstreamtest.Status(http.StatusOK,
			"event: message_start\ndata: "+messageStart+"\n\nevent: error\ndata: "+overloaded+"\n\n", "Content-Type", "text/event-stream"))
		r, raw, events := postMessages(t, sb, key, messagesBody("ac/claude-x", "hi", true))
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
		require.NotEmpty(t, events)
		last := events[len(events)-1]
		assert.Equal(t, "error", last.name)
		assert.JSONEq(t, overloaded, last.data, "the upstream's own error event")
		assert.Zero(t, fallback.Count(pathMessages), "no fallback once the stream started")
	})
	t.Run("an error echoing the key", func(t *testing.T) {
		sb, key, primary, _ := anthropicPair(t)
		const echo = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-1 for this org"}}`
		primary.Enqueue(pathMessages, upstreamtest.Status(http.StatusOK,
			"event: message_start\ndata: "+messageStart+"\n\nevent: error\ndata: "+echo+"\n\n", "Content-Type", "text/event-stream"))
		r, raw, events := postMessages(t, sb, key, messagesBody("ac/claude-x", "hi", true))
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
		require.NotEmpty(t, events)
		last := events[len(events)-1]
		assert.Equal(t, "error", last.name)
		assert.Contains(t, last.data, "authentication_error")
		assert.NotContains(t, last.data, "sk-ant-1", "the connection's key is scrubbed")
	})
	t.Run("messages, first event", func(t *testing.T) {
		sb, key, primary, fallback := anthropicPair(t)
		primary.Enqueue(pathMessages, upstreamtest.Status(http.StatusOK, "event: error\ndata: "+overloaded+"\n\n", "Content-Type", "text/event-stream"))
		r, raw, events := postMessages(t, sb, key, messagesBody("ac/claude-x", "hi", true))
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
		require.NotEmpty(t, events)
		assert.Equal(t, "message_stop", events[len(events)-1].name, "the fallback answered")
		assert.Equal(t, 1, fallback.Count(pathMessages))

		// Alone, the overloaded connection's error is the answer.
		primary.Enqueue(pathMessages, upstreamtest.Status(http.StatusOK, "event: error\ndata: "+overloaded+"\n\n", "Content-Type", "text/event-stream"))
		fallback.Enqueue(pathMessages, upstreamtest.Status(http.StatusOK, "event: error\ndata: "+overloaded+"\n\n", "Content-Type", "text/event-stream"))
		for _, name := range []string{"p", "f"} {
			require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/providers/"+connectionID(t, sb, name)+"/cooldowns", nil).Status)
		}
		r, raw, _ = postMessages(t, sb, key, messagesBody("ac/claude-x", "hi", true))
		require.GreaterOrEqual(t, r.StatusCode, 500, "%s", raw)
		var e struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
		assert.Equal(t, "error", e.Type)
		assert.Equal(t, "overloaded_error", e.Error.Type, "%s", raw)
	})
	t.Run("chat, an error over two data lines", func(t *testing.T) {
		p := newPair(t)
		chunk := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`
		p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK,
			"data: "+chunk+"\n\ndata: {\"error\":{\ndata: \"message\":\"the model is overloaded\",\"type\":\"server_error\"}}\n\n", "Content-Type", "text/event-stream"))
		client := sdk(t, p.sb)
		s := client.Chat.Completions.NewStreaming(t.Context(), userMessage("x"))
		for s.Next() {
		}
		require.Error(t, s.Err())
		assert.Contains(t, s.Err().Error(), "the model is overloaded", "the upstream's error, readable")
	})
	t.Run("responses, response.failed", func(t *testing.T) {
		p := newPair(t)
		created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4o-mini","output":[]}}`
		failed := `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","created_at":1,"status":"failed","model":"gpt-4o-mini","output":[],` +
			`"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model."}}}`
		p.primary.Enqueue(pathResponses, upstreamtest.Status(http.StatusOK,
			"event: response.created\ndata: "+created+"\n\nevent: response.failed\ndata: "+failed+"\n\n", "Content-Type", "text/event-stream"))
		client := sdk(t, p.sb)
		stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: chatModel,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("too long")}})
		var failure *responses.Response
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "response.failed" {
				f := ev.AsResponseFailed().Response
				failure = &f
			}
		}
		require.NoError(t, stream.Err())
		require.NotNil(t, failure)
		assert.Equal(t, "context_length_exceeded", string(failure.Error.Code))
		assert.Equal(t, "Your input exceeds the context window of this model.", failure.Error.Message)
		assert.Zero(t, p.fallback.Count(pathResponses))
	})
}

// Row 13 once the stream started: an upstream that refuses the prompt in
// its stream after the first chunk (OpenAI's in-band invalid_prompt) has
// refused the request, not failed: the client gets the refusal in-band, as
// the upstream said it, and the connection is not cooled, so neither the
// next request nor anyone else's is turned away or sent to the fallback.
// The same error after the stream started cooled the connection for 30
// seconds as a network failure: with one connection, one flagged prompt
// had every other request for the model answered 503.
func TestAnInBandRefusalMidStreamCoolsNothing(t *testing.T) {
	const sure = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Sure"},"finish_reason":null}]}`
	const refusal = `{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy.","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}`
	refused := upstreamtest.Status(http.StatusOK, "data: "+sure+"\n\ndata: "+refusal+"\n\n", "Content-Type", "text/event-stream")
	errorCode := func(r chatReply) string {
		e, _ := r.JSON["error"].(map[string]any)
		c, _ := e["code"].(string)
		return c
	}

	t.Run("with a fallback", func(t *testing.T) {
		p := newPair(t)
		p.primary.Enqueue(pathChat, refused)
		r := chatAsk(t, p.sb, chatModel, "flagged", true)
		require.Equal(t, http.StatusOK, r.Status)
		require.False(t, r.Done, "an in-band error, not a clean end")
		assert.Equal(t, "Sure", r.Content)
		assert.Equal(t, "invalid_prompt", errorCode(r), "the upstream's own error: %v", r.JSON)

		requireAnswer(t, chatAsk(t, p.sb, chatModel, "next", true), "next")
		assert.Equal(t, 2, p.primary.Count(pathChat), "the primary answers the next request")
		assert.Zero(t, p.fallback.Count(pathChat))
	})
	t.Run("alone", func(t *testing.T) {
		sb := nodetest.Serve(t, t.TempDir())
		up := upstreamtest.New(t)
		sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
			"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
		up.Enqueue(pathChat, refused)
		r := chatAsk(t, sb, chatModel, "flagged", true)
		require.Equal(t, "invalid_prompt", errorCode(r), "%v", r.JSON)
		requireAnswer(t, chatAsk(t, sb, chatModel, "someone else", false), "someone else")
	})
}

// A rate limit or a server failure an upstream reports in its stream after
// the first chunk cools the connection for what it is, as the same error
// answered as a status does: a rate limit on the rate-limit backoff, a
// server error as a server's, where both were taken for a network failure.
func TestAnInBandFailureMidStreamCoolsForWhatItIs(t *testing.T) {
	const hello = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`
	for _, tc := range []struct{ name, event, reason string }{
		{"rate limited", `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "rate_limited"},
		{"server error", `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":"server_error"}}`, "server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, "data: "+hello+"\n\ndata: "+tc.event+"\n\n", "Content-Type", "text/event-stream"))
			r := chatAsk(t, p.sb, chatModel, "x", true)
			require.Equal(t, http.StatusOK, r.Status)
			require.False(t, r.Done, "an in-band error, not a clean end")
			require.NotNil(t, r.JSON["error"], "%v", r.Events)
			m := settled(t, p.sb, 1, cooling(tc.reason, 1))
			assert.Zero(t, m.Value("switchboard_connections_cooling", "reason", "network"), "not a network failure")
		})
	}
}

// An error object with no code the gateway knows (code null, as OpenAI
// itself and many compatible servers send it) stands for the status its
// type names: an invalid_request_error reported in a stream's first event,
// or answered with a 200, is the client's 400 with the upstream's message,
// neither tried on the fallback nor cooling the connection, as the same
// error answered with a 400 is. It was a 502 that cooled the connection
// for 30 seconds and sent a prompt that was too long to every other one.
func TestAnErrorWithoutCodeTakesItsTypesStatus(t *testing.T) {
	const tooLong = `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":null,"code":null}}`
	for _, mode := range chatModes {
		t.Run(mode.name, func(t *testing.T) {
			p := newPair(t)
			if mode.stream {
				p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, "data: "+tooLong+"\n\n", "Content-Type", "text/event-stream"))
			} else {
				p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, tooLong))
			}
			r := chatAsk(t, p.sb, chatModel, "long", mode.stream)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			assert.Equal(t, "This model's maximum context length is 8192 tokens.", errorMessage(r))
			assert.Zero(t, p.fallback.Count(pathChat), "no fallback for a bad request")

			requireAnswer(t, chatAsk(t, p.sb, chatModel, "short", mode.stream), "short")
			assert.Equal(t, 2, p.primary.Count(pathChat), "the primary is not cooled")
		})
	}
}
