package node_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// Streams an upstream frames in ways SSE allows, or ends a little early,
// reach the official client whole: an event's JSON over several data lines
// is sent on as several data lines (not one line with a newline in it,
// which broke the client's framing), and a stream that stops right after
// data: [DONE], without the blank line or the line's end, ended cleanly
// (it was an interrupted stream, with an in-band error after the answer and
// the connection cooled).
func TestStreamShapesReachTheClientWhole(t *testing.T) {
	const (
		chunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`
		fin   = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	)
	split := strings.Replace(chunk, `"choices":`, "\ndata: "+`"choices":`, 1)
	for _, c := range []struct{ name, body string }{
		{"one event over two data lines", "data: " + split + "\n\ndata: " + fin + "\n\ndata: [DONE]\n\n"},
		{"[DONE] without the blank line", "data: " + chunk + "\n\ndata: " + fin + "\n\ndata: [DONE]\n"},
		{"[DONE] without its line's end", "data: " + chunk + "\n\ndata: " + fin + "\n\ndata: [DONE]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t)
			p.primary.Enqueue(pathChat, upstreamtest.Status(200, c.body, "Content-Type", "text/event-stream"))
			client := sdk(t, p.sb)
			text, finish := streamedChat(t, client.Chat.Completions.NewStreaming(context.Background(), userMessage("x")))
			assert.Equal(t, "hi", text)
			assert.Equal(t, "stop", finish)

			requireAnswer(t, chatAsk(t, p.sb, chatModel, "again", true), "again")
			assert.Equal(t, 2, p.primary.Count(pathChat), "the primary is not cooled")
			assert.Zero(t, p.fallback.Count(pathChat))
		})
	}
}

// A stream whose upstream names no finish reason in any chunk but ends it
// with data: [DONE], as some compatible servers do, is a whole answer on
// every route: the chat client gets it as it came, a Messages client its
// end_turn and message_stop, a Responses client response.completed, and
// the connection is not cooled. It ended with stream_interrupted after the
// whole answer, and the connection was cooled for 30 seconds.
func TestAStreamEndedByDoneAloneIsWhole(t *testing.T) {
	const (
		chunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}`
		usage = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
		body  = "data: " + chunk + "\n\ndata: " + usage + "\n\ndata: [DONE]\n\n"
	)
	sb, up, key := compatibleUpstream(t)
	ask := func() {
		up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusOK, body, "Content-Type", "text/event-stream"))
	}

	ask()
	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	text, _ := streamedChat(t, client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "local/m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}))
	assert.Equal(t, "hi", text)

	ask()
	r, raw, events := postMessages(t, sb, key, messagesBody("local/m", "x", true))
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	a := accumulate(t, events)
	assert.Equal(t, "hi", a.text)
	assert.Equal(t, "end_turn", a.stopReason)

	ask()
	assert.Equal(t, "response.completed", lastResponsesEvent(t, client, "local/m"))

	assert.Empty(t, sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"], "the connection is not cooled")
}

// streamedChat reads a chat stream through the official SDK to its end:
// the text its chunks delivered and the last finish reason named.
func streamedChat(t *testing.T, s *ssestream.Stream[openai.ChatCompletionChunk]) (text, finish string) {
	t.Helper()
	var b strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			b.WriteString(ch.Delta.Content)
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	require.NoError(t, s.Err())
	return b.String(), finish
}

// lastResponsesEvent asks model for a streamed Response through the
// official SDK and gives the type of the last event of the stream.
func lastResponsesEvent(t *testing.T, client openai.Client, model string) string {
	t.Helper()
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	last := ""
	for stream.Next() {
		last = stream.Current().Type
	}
	require.NoError(t, stream.Err())
	return last
}
