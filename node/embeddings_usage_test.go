package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Embeddings from a server that reports no usage (or zeros) are recorded
// with the gateway's count of the input, as a chat answer the upstream
// reported no usage for is: about four characters a token of each text,
// the tokens themselves of token arrays; marked estimated. The client's
// answer is the upstream's. A server that reports usage is recorded by it.
func TestEmbeddingsUsageEstimatedWhenTheUpstreamReportsNone(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "l",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})

	one := `{"object":"embedding","index":0,"embedding":[0.5,-0.25,1]}`
	two := `{"object":"embedding","index":1,"embedding":[0.5,-0.25,1]}`
	for _, tc := range []struct {
		name      string
		input     any
		answer    string
		prompt    int64
		estimated bool
	}{
		{"no usage, texts", []string{"hello world", "héllo"}, `{"object":"list","data":[` + one + `,` + two + `],"model":"nomic"}`, 3 + 2, true},
		{"zero usage", "a text of 23 characters", `{"object":"list","data":[` + one + `],"model":"nomic","usage":{"prompt_tokens":0,"total_tokens":0}}`, 6, true},
		{"no usage, token arrays", [][]int{{1, 2, 3}, {4, 5}}, `{"object":"list","data":[` + one + `,` + two + `],"model":"nomic"}`, 5, true},
		{"usage reported", "x", `{"object":"list","data":[` + one + `],"model":"nomic","usage":{"prompt_tokens":9,"total_tokens":9}}`, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(usageEvents(t, sb))
			up.Enqueue(pathEmbed, upstreamtest.Status(http.StatusOK, tc.answer, "Content-Type", "application/json"))
			r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "local/nomic", "input": tc.input})
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

			var evs []*busv1.UsageEvent
			require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) == before+1 }, 5*time.Second, 20*time.Millisecond)
			ev := evs[len(evs)-1]
			assert.Equal(t, "embeddings", ev.GetEndpoint())
			assert.Equal(t, tc.prompt, ev.GetPromptTokens())
			assert.Equal(t, tc.prompt, ev.GetTotalTokens())
			assert.Equal(t, tc.estimated, ev.GetTokensEstimated())
		})
	}
}
