package node_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// compatibleUpstream is a serve instance with one openai-compatible
// connection ("local", models "local/<id>") on a fake upstream, and a key.
func compatibleUpstream(t *testing.T) (*nodetest.Instance, *upstreamtest.Server, string) {
	t.Helper()
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "local", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local", "enabledModels": []string{"m"}}})
	return sb, up, gatewayKey(t, sb)
}

// anthropicErrorOf reads an Anthropic-shaped error body.
func anthropicErrorOf(t *testing.T, raw []byte) (typ, msg string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
	assert.Equal(t, "error", e.Type, "%s", raw)
	return e.Error.Type, e.Error.Message
}

// An OpenAI-shaped error whose code is a number (llama.cpp's server and
// vLLM send the status there) reaches a /v1/messages client translated to
// an OpenAI-compatible upstream with the upstream's message, as it reaches
// a chat client. Its message was lost for "credential: upstream answered
// 400 Bad Request", the code being read as a string.
func TestMessagesKeepTheMessageOfAnErrorWithANumericCode(t *testing.T) {
	const llamaCpp = `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`
	sb, up, key := compatibleUpstream(t)
	for _, stream := range []bool{false, true} {
		up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusBadRequest, llamaCpp))
		r, raw, _ := postMessages(t, sb, key, messagesBody("local/m", "long", stream))
		require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", raw)
		typ, msg := anthropicErrorOf(t, raw)
		assert.Equal(t, "invalid_request_error", typ)
		assert.Equal(t, "the request exceeds the available context size, try increasing it", msg, "stream %v", stream)
	}
}

// A refusal in a shape other than OpenAI's reaches the client with the
// upstream's message, on every route: {"error": "..."} (LM Studio),
// {"message": ...} at the top (Mistral, vLLM before its errors took
// OpenAI's shape) and plain text. The message was the gateway's
// "credential: upstream answered 400 Bad Request", which says nothing of
// what to change.
func TestRefusalsInOtherShapesKeepTheirMessage(t *testing.T) {
	const msg = "model 'm' not found, try pulling it first"
	bodies := map[string]string{
		"error string":        `{"error":"` + msg + `"}`,
		"top-level message":   `{"object":"error","message":"` + msg + `","type":"BadRequestError","param":null,"code":400}`,
		"plain text":          msg + "\n",
		"plain text, spelled": " " + msg,
	}
	sb, up, key := compatibleUpstream(t)
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{pathChat, pathResponses} {
				up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusBadRequest, body))
				req := map[string]any{"model": "local/m", "messages": []map[string]any{{"role": "user", "content": "q"}}}
				if path == pathResponses {
					req = map[string]any{"model": "local/m", "input": "q"}
				}
				r := sb.Do(t, http.MethodPost, path, req, "Authorization", "Bearer "+key)
				require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", path, r.Body)
				assert.Equal(t, msg, errorMessageOf(r), path)
				assert.Equal(t, "invalid_request_error", errorType(r), path)
			}
			up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusBadRequest, body))
			r, raw, _ := postMessages(t, sb, key, messagesBody("local/m", "q", false))
			require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", raw)
			_, got := anthropicErrorOf(t, raw)
			assert.Equal(t, msg, got)
		})
	}
}

// An error answered with a 200 status (an error object and no choices, as
// some compatible servers and proxies send) is read on /v1/messages and
// /v1/responses translated to chat as it is on chat: a failed attempt with
// the status the error stands for and its message, here a 400 that cools
// nothing. Those routes took it for an invalid completion: a 502 "upstream
// returned an invalid completion" that cooled the connection.
func TestTranslatedWholeAnswersReadAnErrorIn200(t *testing.T) {
	const tooLong = `{"error":{"message":"prompt is too long for this model","type":"invalid_request_error","param":null,"code":null}}`
	sb, up, key := compatibleUpstream(t)

	up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusOK, tooLong))
	r, raw, _ := postMessages(t, sb, key, messagesBody("local/m", "long", false))
	require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", raw)
	_, msg := anthropicErrorOf(t, raw)
	assert.Equal(t, "prompt is too long for this model", msg)

	up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusOK, tooLong))
	resp := sb.Do(t, http.MethodPost, pathResponses, map[string]any{"model": "local/m", "input": "long"}, "Authorization", "Bearer "+key)
	require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
	assert.Equal(t, "prompt is too long for this model", errorMessageOf(resp))

	assert.Empty(t, sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"], "the connection is not cooled")
}

// An error object at the top of a stream's event, as vLLM sends one
// ({"object":"error","message",...,"code":400}), is read as the error it
// is, as a chunk with an error member is: before anything else of the
// stream, the client's error with its status and message, on chat and on
// routes translated to chat; after, the client's in-band error with its
// message. It was relayed to chat clients as a chunk, then the stream ended
// with stream_interrupted and the connection was cooled.
func TestATopLevelErrorEventIsAnError(t *testing.T) {
	const (
		msg   = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."
		vllm  = `{"object":"error","message":"` + msg + `","type":"BadRequestError","param":null,"code":400}`
		chunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`
	)
	sb, up, key := compatibleUpstream(t)
	ask := func(body string) {
		up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusOK, body, "Content-Type", "text/event-stream"))
	}

	ask("data: " + vllm + "\n\n")
	r := sb.Do(t, http.MethodPost, pathChat, map[string]any{"model": "local/m", "stream": true,
		"messages": []map[string]any{{"role": "user", "content": "long"}}}, "Authorization", "Bearer "+key)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	assert.Equal(t, msg, errorMessageOf(r))

	ask("data: " + vllm + "\n\n")
	resp, raw, _ := postMessages(t, sb, key, messagesBody("local/m", "long", true))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)
	_, got := anthropicErrorOf(t, raw)
	assert.Equal(t, msg, got)

	ask("data: " + chunk + "\n\ndata: " + vllm + "\n\n")
	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	s := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "local/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("long")}})
	for s.Next() {
		assert.NotEmpty(t, s.Current().Choices, "no chunk without choices: %s", s.Current().RawJSON())
	}
	require.Error(t, s.Err())
	assert.Contains(t, s.Err().Error(), msg)

	assert.Empty(t, sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"], "a bad request cools nothing")
}

// An error answer whose body says nothing the gateway can read (empty, or
// an HTML page) gives the client a message naming the status, in the
// route's error shape, from an OpenAI-compatible or an Anthropic-compatible
// upstream, where the client got the gateway's internal "credential:
// upstream answered 400 Bad Request".
func TestAnErrorWithoutAMessageNamesItsStatus(t *testing.T) {
	const want = "the upstream answered 400 Bad Request"
	sb, up, key := compatibleUpstream(t)
	anth := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-x", "name": "ac", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": anth.URL(), "prefix": "ac", "enabledModels": []string{"claude-x"}}})
	for name, body := range map[string]string{"empty": "", "html": "<html><body><h1>400 Bad Request</h1></body></html>"} {
		for _, c := range []struct {
			model string
			up    *upstreamtest.Server
			path  string
		}{{"local/m", up, upstreamtest.PathChatCompletions}, {"ac/claude-x", anth, upstreamtest.PathMessages}} {
			for _, path := range []string{pathChat, pathResponses, pathMessages} {
				c.up.Enqueue(c.path, upstreamtest.Status(http.StatusBadRequest, body))
				var status int
				var got string
				if path == pathMessages {
					r, raw, _ := postMessages(t, sb, key, messagesBody(c.model, "x", false))
					status = r.StatusCode
					_, got = anthropicErrorOf(t, raw)
				} else {
					req := map[string]any{"model": c.model, "messages": []map[string]any{{"role": "user", "content": "x"}}}
					if path == pathResponses {
						req = map[string]any{"model": c.model, "input": "x"}
					}
					r := sb.Do(t, http.MethodPost, path, req, "Authorization", "Bearer "+key)
					status, got = r.Status, errorMessageOf(r)
				}
				assert.Equal(t, http.StatusBadRequest, status, "%s body, %s on %s", name, path, c.model)
				assert.Equal(t, want, got, "%s body, %s on %s", name, path, c.model)
			}
		}
	}
}

// A whole answer that is itself an error object ({"object":"error",...},
// as vLLM answers with a 200 status behind some proxies) is the client's
// error with the status of its code and its message, on chat and on the
// routes translated to chat, where chat passed it on as a 200 completion.
func TestAWholeAnswerThatIsAnErrorObjectIsAnError(t *testing.T) {
	const (
		msg  = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."
		vllm = `{"object":"error","message":"` + msg + `","type":"BadRequestError","param":null,"code":400}`
	)
	sb, up, key := compatibleUpstream(t)
	for _, path := range []string{pathChat, pathResponses, pathMessages} {
		up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusOK, vllm))
		var status int
		var got string
		if path == pathMessages {
			r, raw, _ := postMessages(t, sb, key, messagesBody("local/m", "long", false))
			status = r.StatusCode
			_, got = anthropicErrorOf(t, raw)
		} else {
			req := map[string]any{"model": "local/m", "messages": []map[string]any{{"role": "user", "content": "long"}}}
			if path == pathResponses {
				req = map[string]any{"model": "local/m", "input": "long"}
			}
			r := sb.Do(t, http.MethodPost, path, req, "Authorization", "Bearer "+key)
			status, got = r.Status, errorMessageOf(r)
		}
		assert.Equal(t, http.StatusBadRequest, status, "%s", path)
		assert.Equal(t, msg, got, "%s", path)
	}
	assert.Empty(t, sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"], "a bad request cools nothing")
}
