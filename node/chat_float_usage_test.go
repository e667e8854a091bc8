package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// A chat answer passed through from a compatible upstream that writes its
// token counts as whole-valued floats ("prompt_tokens":3.0, as some
// servers send) is recorded with those counts, whole and streamed, and a
// stream whose stop chunk carries that usage ends whole. The counts were
// not read: the request was recorded as the gateway's estimate, and a
// stream without [DONE] ended as if cut.
func TestChatUsageWrittenAsFloatsIsRecorded(t *testing.T) {
	const usage = `{"prompt_tokens":3.0,"completion_tokens":1.0,"total_tokens":4.0}`
	whole := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + usage + `}`
	chunk := func(delta, finish, usage string) string {
		return "data: " + `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,` +
			`"delta":` + delta + `,"finish_reason":` + finish + `}],"usage":` + usage + "}\n\n"
	}
	stream := chunk(`{"role":"assistant","content":"hi"}`, "null", "null") + chunk(`{}`, `"stop"`, usage)

	sb, up, key := compatibleUpstream(t)
	for _, tc := range []struct {
		name, answer string
		stream       bool
	}{
		{"whole", whole, false},
		{"streamed", stream + "data: [DONE]\n\n", true},
		{"streamed, no [DONE]", stream, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(usageEvents(t, sb))
			headers := []string{}
			if tc.stream {
				headers = []string{"Content-Type", "text/event-stream"}
			}
			up.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Status(http.StatusOK, tc.answer, headers...))
			r := sb.Do(t, http.MethodPost, pathChat, map[string]any{"model": "local/m", "stream": tc.stream,
				"messages": []map[string]any{{"role": "user", "content": "a question of some length"}}}, "Authorization", "Bearer "+key)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			assert.NotContains(t, string(r.Body), `"error"`, "an answer that ended whole: %s", r.Body)

			var evs []*busv1.UsageEvent
			require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) == before+1 }, 5*time.Second, 20*time.Millisecond)
			ev := evs[len(evs)-1]
			assert.Equal(t, [3]int64{3, 1, 4}, [3]int64{ev.GetPromptTokens(), ev.GetCompletionTokens(), ev.GetTotalTokens()})
			assert.False(t, ev.GetTokensEstimated(), "the upstream's counts")
			assert.False(t, ev.GetPartial())
		})
	}
}
