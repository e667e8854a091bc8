package node_test

import (
	"fmt"
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

// Three requests sending the same X-Request-Id are three usage events, all
// counted; a header that is not UTF-8, or huge, changes nothing but the
// request id field (sanitised, bounded, echoed back).
func TestUsageClientRequestIDsDoNotDeduplicate(t *testing.T) {
	p := newPair(t)
	for range 3 {
		r := p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "hi"}, "X-Request-Id", "same-id")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "same-id", r.Header.Get("X-Request-Id"))
	}
	bad := p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "hi"}, "X-Request-Id", "ok\xff\xfeid")
	require.Equal(t, http.StatusOK, bad.Status, "%s", bad.Body)
	assert.Equal(t, "okid", bad.Header.Get("X-Request-Id"))
	huge := p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "hi"}, "X-Request-Id", strings.Repeat("h", 8000))
	require.Equal(t, http.StatusOK, huge.Status, "%s", huge.Body)
	assert.Equal(t, strings.Repeat("h", 128), huge.Header.Get("X-Request-Id"))

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, p.sb); return len(evs) >= 5 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, evs, 5)
	ids := map[string]bool{}
	same := 0
	for _, ev := range evs {
		ids[ev.GetEventId()] = true
		if ev.GetRequestId() == "same-id" {
			same++
		}
	}
	assert.Equal(t, 3, same)
	assert.Len(t, ids, 5, "each event has an id of its own")
	assert.Equal(t, "okid", evs[3].GetRequestId())
	assert.Len(t, evs[4].GetRequestId(), 128)

	// And the roll-up counts them all.
	require.Eventually(t, func() bool {
		r := p.sb.Admin(t, http.MethodGet, pathUsageStats, nil)
		tot, _ := r.JSON["totals"].(map[string]any)
		return tot != nil && tot["requests"] == float64(5)
	}, 20*time.Second, 50*time.Millisecond)
}

// chunk is an OpenAI stream chunk carrying text.
func chunk(text string) string {
	return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", text)
}

// A stream cut by the upstream after content reached the client is billed
// the gateway's count of what it delivered and of the prompt, marked
// estimated and partial.
func TestUsageCutStreamBilledWhatWasDelivered(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 3 {
			fmt.Fprint(w, chunk("abcdefgh"))
		}
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-stream
	}))
	defer up.Close()
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})

	status, events := streamChat(t, sb, "x")
	require.Equal(t, http.StatusOK, status)
	require.NotEmpty(t, events)

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) >= 1 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.EqualValues(t, 6, ev.GetCompletionTokens(), "24 characters delivered, about 6 tokens")
	assert.EqualValues(t, 1, ev.GetPromptTokens(), "the upstream read the prompt (\"x\", about 1 token) though it never told its count")
	assert.EqualValues(t, 7, ev.GetTotalTokens())
	assert.True(t, ev.GetTokensEstimated())
	assert.True(t, ev.GetPartial())
}

// A client that disconnects mid-stream is billed what reached it.
func TestUsageClientDisconnectBilledWhatWasDelivered(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 2 {
			fmt.Fprint(w, chunk("abcdefgh"))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer up.Close()
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})

	leaveAfterFirstChunk(t, sb)

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) >= 1 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, evs, 1)
	ev := evs[0]
	// At least the chunk the client read (8 characters, 2 tokens).
	assert.GreaterOrEqual(t, ev.GetCompletionTokens(), int64(2))
	assert.LessOrEqual(t, ev.GetCompletionTokens(), int64(4))
	assert.True(t, ev.GetTokensEstimated())
	assert.True(t, ev.GetPartial())
}
