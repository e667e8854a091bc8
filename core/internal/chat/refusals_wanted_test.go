package chat

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// A connection remembered as refusing the reasoning sent back whose server
// now wants it (the connection pointed at DeepSeek since, or a server
// behind it that varies) is asked again with it, once: the client gets the
// answer, where it got DeepSeek's 400 for a reasoning it had sent.
func TestWithheldReasoningWantedIsSentAgain(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !strings.Contains(string(b), `"reasoning_content"`) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"The `+"`reasoning_content`"+` in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Sunny."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`)
	}))
	t.Cleanup(srv.Close)
	in, err := parse(DialectMessages, []byte(`{"model":"m","max_tokens":100,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[`+
		`{"role":"user","content":"Weather in Paris?"},`+
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Use the tool.","signature":""},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}]}`))
	require.NoError(t, err)
	spec := provider.Spec{Format: provider.FormatOpenAI, ReasoningBack: true}
	svc := &Service{opts: Options{StallTimeout: time.Minute, FirstEventTimeout: time.Minute}}
	svc.refusals.remember(refusalKey("conn", "m"), time.Now())
	sink := &streamRecorder{}
	cp := &completion{s: svc, in: in, sink: sink, start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = cp.call(ctx, routing.Target{Spec: spec, Model: "m"},
		&dispatch.Conn{Connection: &busv1.Connection{Id: "conn"}, Spec: spec, BaseURL: srv.URL, Client: srv.Client()})
	require.NoError(t, err)
	assert.Contains(t, string(sink.whole), "Sunny.")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 2, "asked without the reasoning, then with it")
	assert.NotContains(t, bodies[0], `reasoning_content`)
	assert.Contains(t, bodies[1], `"reasoning_content":"Use the tool."`)
	assert.False(t, svc.refusals.refuses(refusalKey("conn", "m"), time.Now()), "forgotten")
}
