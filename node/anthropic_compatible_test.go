package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
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
	s := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "ac/claude-x",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var text strings.Builder
	finish := ""
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	require.NoError(t, s.Err())
	assert.Equal(t, "hi", text.String())
	assert.Equal(t, "stop", finish)

	ask()
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "ac/claude-x",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	last := ""
	for stream.Next() {
		last = stream.Current().Type
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "response.completed", last)

	assert.Empty(t, sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"], "the connection is not cooled")
}
