package node_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// A speech asked for as server-sent events from a token-billed model
// (gpt-4o-mini-tts) is recorded with the tokens its speech.audio.done
// event reports, beside the input's characters; the events reach the
// client as the upstream sent them. The done event may come in pieces
// and after audio deltas far larger than itself.
func TestAudioSpeechSSEUsage(t *testing.T) {
	audio := base64.StdEncoding.EncodeToString(make([]byte, 96<<10))
	events := "data: {\"type\":\"speech.audio.delta\",\"audio\":\"" + audio + "\"}\n\n" +
		"data: {\"type\":\"speech.audio.delta\",\"audio\":\"" + audio + "\"}\n\n" +
		"data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":14,\"output_tokens\":101,\"total_tokens\":115}}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rest := events
		for len(rest) > 0 { // in uneven pieces, the done event split
			n := min(len(rest), 7001)
			_, _ = io.WriteString(w, rest[:n])
			w.(http.Flusher).Flush()
			rest = rest[n:]
		}
	}))
	defer up.Close()
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})
	k := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "speech"})
	require.Equal(t, http.StatusCreated, k.Status, "%s", k.Body)

	input := "Hello from the gateway."
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+pathSpeech,
		strings.NewReader(`{"model":"`+voiceModel+`","input":"`+input+`","stream_format":"sse"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+k.JSON["key"].(string))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, events, string(body), "the events as the upstream sent them")

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
	ev := evs[0]
	assert.Equal(t, "audio.speech", ev.GetEndpoint())
	assert.Equal(t, []int64{14, 101, 115}, []int64{ev.GetPromptTokens(), ev.GetCompletionTokens(), ev.GetTotalTokens()}, "the done event's usage")
	assert.EqualValues(t, len(input), ev.GetCharacters())
	assert.False(t, ev.GetPartial())
}
