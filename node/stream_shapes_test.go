package node_test

import (
	"context"
	"strings"
	"testing"

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
			s := client.Chat.Completions.NewStreaming(context.Background(), userMessage("x"))
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

			requireAnswer(t, chatAsk(t, p.sb, chatModel, "again", true), "again")
			assert.Equal(t, 2, p.primary.Count(pathChat), "the primary is not cooled")
			assert.Zero(t, p.fallback.Count(pathChat))
		})
	}
}
