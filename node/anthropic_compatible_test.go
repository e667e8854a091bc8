package node_test

import (
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// anthropicCompatible is a serve instance with one anthropic-compatible
// connection ("ac", models "ac/<id>") on a fake upstream, and a key.
func anthropicCompatible(t *testing.T) (*nodetest.Instance, *upstreamtest.Server, string) {
	t.Helper()
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant"))
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-x", "name": "ac", "apiKey": "sk-ant",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "ac", "enabledModels": []string{"claude-x"}}})
	return sb, up, gatewayKey(t, sb)
}

// A stream an Anthropic-compatible upstream ends after message_delta named
// its stop reason, without message_stop, as some compatible servers do, is
// a whole answer on every route: a Messages client gets it closed with
// message_stop, a chat client its finish reason and no error, a Responses
// client response.completed, and the connection is not cooled. It ended
// with stream_interrupted after the whole answer and cooled the connection,
// where the chat equivalent (a finish reason, no [DONE]) ended cleanly.
func TestAnAnthropicStreamEndedAfterItsStopReasonIsWhole(t *testing.T) {
	const body = "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}` + "\n\n" +
		"event: content_block_stop\ndata: " + `{"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}` + "\n\n"
	sb, up, key := anthropicCompatible(t)
	ask := func() {
		up.Enqueue(upstreamtest.PathMessages, upstreamtest.Status(http.StatusOK, body, "Content-Type", "text/event-stream"))
	}

	ask()
	r, raw, events := postMessages(t, sb, key, messagesBody("ac/claude-x", "x", true))
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	a := accumulate(t, events)
	assert.Equal(t, "hi", a.text)
	assert.Equal(t, "end_turn", a.stopReason)

	ask()
	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	text, finish := streamedChat(t, client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "ac/claude-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}))
	assert.Equal(t, "hi", text)
	assert.Equal(t, "stop", finish)

	ask()
	assert.Equal(t, "response.completed", lastResponsesEvent(t, client, "ac/claude-x"))

	assert.Empty(t, sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"], "the connection is not cooled")
}

// uncool ends the cooldowns of the connection named name.
func uncool(t *testing.T, sb *nodetest.Instance, name string) {
	t.Helper()
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/providers/"+connectionID(t, sb, name)+"/cooldowns", nil).Status)
}

// askOpenAI sends text to model on the chat or the Responses route.
func askOpenAI(t *testing.T, sb *nodetest.Instance, key, path, model, text string, stream bool) nodetest.Response {
	t.Helper()
	req := map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": text}}, "stream": stream}
	if path == pathResponses {
		req = map[string]any{"model": model, "input": text, "stream": stream}
	}
	return sb.Do(t, http.MethodPost, path, req, "Authorization", "Bearer "+key)
}

// An HTML page an Anthropic-compatible upstream answers with (a proxy's
// 502) gives chat and Responses clients the gateway's message naming the
// status, as it does on an OpenAI-compatible upstream, where the page
// itself was the message; an Anthropic-shaped error and short plain text
// keep their message.
func TestAnAnthropicUpstreamsHTMLPageIsNoMessage(t *testing.T) {
	const page = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n"
	sb, up, key := anthropicCompatible(t)
	for _, path := range []string{pathChat, pathResponses} {
		up.Enqueue(upstreamtest.PathMessages, upstreamtest.Status(http.StatusBadGateway, page, "Content-Type", "text/html"))
		r := askOpenAI(t, sb, key, path, "ac/claude-x", "x", false)
		require.Equal(t, http.StatusBadGateway, r.Status, "%s: %s", path, r.Body)
		assert.Contains(t, errorMessageOf(r), "last upstream answer 502 Bad Gateway", path)
		assert.NotContains(t, string(r.Body), "<html>", path)
		uncool(t, sb, "ac")
	}
	for name, c := range map[string]struct{ body, msg string }{
		"anthropic":  {`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`, "prompt is too long"},
		"plain text": {"model 'claude-x' not found\n", "model 'claude-x' not found"},
	} {
		up.Enqueue(upstreamtest.PathMessages, upstreamtest.Status(http.StatusBadRequest, c.body))
		r := askOpenAI(t, sb, key, pathChat, "ac/claude-x", "x", false)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r.Body)
		assert.Equal(t, c.msg, errorMessageOf(r), name)
	}
}

// An error event an Anthropic-compatible upstream sends in OpenAI's shape,
// as some do, reaches the client with the upstream's message on every
// route, before anything else of its stream and after, where /v1/messages
// got "the upstream reported an error mid-stream" and chat "upstream
// api_error: bad thing".
func TestAnOpenAIShapedErrorEventKeepsItsMessage(t *testing.T) {
	const (
		failed       = "event: error\ndata: " + `{"error":{"message":"bad thing","code":"1301"}}` + "\n\n"
		messageStart = "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}` + "\n\n"
	)
	sb, up, key := anthropicCompatible(t)
	ask := func() {
		up.Enqueue(upstreamtest.PathMessages, upstreamtest.Status(http.StatusOK, failed, "Content-Type", "text/event-stream"))
	}

	ask()
	r, raw, _ := postMessages(t, sb, key, messagesBody("ac/claude-x", "x", true))
	require.GreaterOrEqual(t, r.StatusCode, 400, "%s", raw)
	_, msg := anthropicErrorOf(t, raw)
	assert.Equal(t, "bad thing", msg)
	uncool(t, sb, "ac")

	for _, path := range []string{pathChat, pathResponses} {
		ask()
		r := askOpenAI(t, sb, key, path, "ac/claude-x", "x", true)
		require.GreaterOrEqual(t, r.Status, 400, "%s: %s", path, r.Body)
		assert.Equal(t, "bad thing", errorMessageOf(r), path)
		uncool(t, sb, "ac")
	}

	up.Enqueue(upstreamtest.PathMessages, upstreamtest.Status(http.StatusOK, messageStart+failed, "Content-Type", "text/event-stream"))
	assert.Equal(t, "bad thing", streamedMessagesError(t, sb, key, "ac/claude-x"), "mid-stream")
}

// The same error sent without an event line (its data alone, with no
// type) is read as the error it is, with the upstream's message, on every
// route, before anything else of its stream and after. It was ignored: the
// client got "the upstream ended the stream before it finished".
func TestAnUnnamedOpenAIShapedErrorEventKeepsItsMessage(t *testing.T) {
	const (
		failed       = "data: " + `{"error":{"message":"bad thing","code":"1301"}}` + "\n\n"
		messageStart = "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}` + "\n\n"
	)
	sb, up, key := anthropicCompatible(t)
	ask := func(body string) {
		up.Enqueue(upstreamtest.PathMessages, upstreamtest.Status(http.StatusOK, body, "Content-Type", "text/event-stream"))
	}

	for _, path := range []string{pathChat, pathResponses} {
		ask(failed)
		r := askOpenAI(t, sb, key, path, "ac/claude-x", "x", true)
		require.GreaterOrEqual(t, r.Status, 400, "%s: %s", path, r.Body)
		assert.Equal(t, "bad thing", errorMessageOf(r), path)
		uncool(t, sb, "ac")

		ask(messageStart + failed)
		r = askOpenAI(t, sb, key, path, "ac/claude-x", "x", true)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
		assert.Contains(t, string(r.Body), `"message":"bad thing"`, "%s mid-stream", path)
		uncool(t, sb, "ac")
	}

	ask(failed)
	r, raw, _ := postMessages(t, sb, key, messagesBody("ac/claude-x", "x", true))
	require.GreaterOrEqual(t, r.StatusCode, 400, "%s", raw)
	_, msg := anthropicErrorOf(t, raw)
	assert.Equal(t, "bad thing", msg)
	uncool(t, sb, "ac")

	ask(messageStart + failed)
	assert.Equal(t, "bad thing", streamedMessagesError(t, sb, key, "ac/claude-x"), "mid-stream")
}

// streamedMessagesError asks model for a streamed Message that its
// upstream ends with an error after it began, and gives the message of
// the error event that ends the client's stream.
func streamedMessagesError(t *testing.T, sb *nodetest.Instance, key, model string) string {
	t.Helper()
	r, raw, events := postMessages(t, sb, key, messagesBody(model, "x", true))
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	require.NotEmpty(t, events)
	last := events[len(events)-1]
	assert.Equal(t, "error", last.name)
	_, msg := anthropicErrorOf(t, []byte(last.data))
	return msg
}
