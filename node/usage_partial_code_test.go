package node_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// A stream the upstream cut after content reached the client is recorded
// as a failure (status 502): the request log should say which failure
// (stream_interrupted, the code the client got in its error event), as it
// does for every other failed request.
func TestUsageCutStreamRecordsItsErrorCode(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, chunk("abcdefgh"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer up.Close()
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})
	status, events := streamChat(t, sb, "x")
	require.Equal(t, http.StatusOK, status)
	require.NotEmpty(t, events)

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) >= 1 }, 10*time.Second, 20*time.Millisecond)
	ev := evs[0]
	t.Logf("status=%d errorCode=%q partial=%v", ev.GetStatus(), ev.GetErrorCode(), ev.GetPartial())
	require.EqualValues(t, http.StatusBadGateway, ev.GetStatus())
	assert.Equal(t, "stream_interrupted", ev.GetErrorCode())

	// The request log the console and /api/usage/requests?status=error show.
	r := sb.Admin(t, http.MethodGet, "/api/usage/requests?status=5xx", nil)
	require.Equal(t, http.StatusOK, r.Status)
	reqs, _ := r.JSON["requests"].([]any)
	require.Len(t, reqs, 1)
	assert.Equal(t, "stream_interrupted", reqs[0].(map[string]any)["errorCode"])
}
