package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// openStream is a stream read as it comes: started is closed at its first
// event, ended carries its events and how its body ended.
type openStream struct {
	started chan struct{}
	ended   chan streamEnd
}

type streamEnd struct {
	events []sseEvent
	err    error // the body's read error: nil for a clean end of the response
}

// streamOpen posts body to path and reads the answer's events in the
// background.
func streamOpen(t *testing.T, sb *nodetest.Instance, path, body string) *openStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	s := &openStream{started: make(chan struct{}), ended: make(chan streamEnd, 1)}
	go func() {
		var end streamEnd
		defer func() { s.ended <- end }()
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			end.err = err
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				if len(end.events) == 0 {
					close(s.started)
				}
				end.events = append(end.events, sseEvent{name, v})
				name = ""
			}
		}
		end.err = sc.Err()
	}()
	return s
}

// A shutdown whose grace period (SWITCHBOARD_SHUTDOWN_TIMEOUT) runs out
// while streams are open ends each with its dialect's in-band error, a 503
// that says the gateway is shutting down, so the client raises an error it
// can retry elsewhere (a whole answer still awaited is that 503); the
// connection is not cut, the stop is an orderly one (no error, exit status
// 0), new connections are refused while it drains, and what was streamed is
// billed as for any stream cut short.
func TestShutdownEndsOpenStreamsWithTheirDialectsError(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.ShutdownTimeout = time.Second
	// The upstream's silence outlasts the grace period.
	cfg.StallTimeout, cfg.FirstByteTimeout = time.Minute, time.Minute
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	up.Enqueue(pathChat, upstreamtest.StallAfter(2), upstreamtest.StallAfter(2), upstreamtest.StallAfter(2), upstreamtest.Hang())
	up.Enqueue(pathResponses, upstreamtest.StallAfter(6)) // up to two text deltas

	chatBody := `{"model":"` + chatModel + `","stream":true,"messages":[{"role":"user","content":"a long answer please"}]}`
	chatRaw := streamOpen(t, sb, pathChat, chatBody)
	messages := streamOpen(t, sb, pathMessages, `{"model":"`+chatModel+`","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"a long answer please"}]}`)
	resps := streamOpen(t, sb, pathResponses, `{"model":"`+chatModel+`","stream":true,"input":"a long answer please"}`)
	// The official client too.
	sdkStarted, sdkErr := make(chan struct{}), make(chan error, 1)
	client := sdk(t, sb)
	go func() {
		s := client.Chat.Completions.NewStreaming(t.Context(), userMessage("a long answer please"))
		first := true
		for s.Next() {
			if first {
				close(sdkStarted)
				first = false
			}
		}
		sdkErr <- s.Err()
	}()
	for _, started := range []chan struct{}{chatRaw.started, messages.started, resps.started, sdkStarted} {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("a stream did not start")
		}
	}

	// A whole answer still awaited is a 503 the client may send again.
	wholeErr := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(t.Context(), userMessage("a long answer please"))
		wholeErr <- err
	}()
	require.Eventually(t, func() bool { return up.Count(pathChat) == 4 }, 10*time.Second, 10*time.Millisecond)

	// While the process drains, a new connection is refused: the listener
	// is closed.
	refused := make(chan error, 1)
	go func() {
		fresh := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		deadline := time.Now().Add(cfg.ShutdownTimeout)
		for time.Now().Before(deadline) {
			resp, err := fresh.Post(sb.BaseURL+pathChat, "application/json", strings.NewReader(chatBody))
			if err != nil {
				refused <- err
				return
			}
			resp.Body.Close()
			time.Sleep(20 * time.Millisecond)
		}
		refused <- nil
	}()
	stopped := time.Now()
	sb.Stop() // fails the test when the process stops with an error
	took := time.Since(stopped)
	assert.Less(t, took, cfg.ShutdownTimeout+5*time.Second, "the stop waits for the grace period, then ends the streams")
	// Refused at the connection (or reset in the listener's backlog as it
	// closed): no answer.
	assert.Error(t, <-refused, "a request sent during the drain is refused")

	end := func(s *openStream) streamEnd {
		t.Helper()
		select {
		case e := <-s.ended:
			require.NoError(t, e.err, "the stream's body ended cleanly, not cut")
			require.GreaterOrEqual(t, len(e.events), 2, "%v", e.events)
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("the stream was still open after the process stopped")
			return streamEnd{}
		}
	}

	// Chat Completions: an error chunk, no [DONE].
	chat := end(chatRaw)
	last := chat.events[len(chat.events)-1]
	assert.NotEqual(t, "[DONE]", last.data, "never a clean end")
	var chatErr struct {
		Error struct{ Message, Type, Code string }
	}
	require.NoError(t, json.Unmarshal([]byte(last.data), &chatErr), last.data)
	assert.Equal(t, "shutting_down", chatErr.Error.Code, last.data)
	assert.Contains(t, chatErr.Error.Message, "shutting down")

	// Messages: Anthropic's event: error.
	msgs := end(messages)
	last = msgs.events[len(msgs.events)-1]
	assert.Equal(t, "error", last.name, "%v", msgs.events)
	var anthErr struct {
		Type  string
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(last.data), &anthErr), last.data)
	assert.Equal(t, "error", anthErr.Type)
	assert.Equal(t, "api_error", anthErr.Error.Type, "Anthropic's type of a 503")
	assert.Contains(t, anthErr.Error.Message, "shutting down")

	// Responses: response.failed naming the response.
	rs := end(resps)
	last = rs.events[len(rs.events)-1]
	assert.Equal(t, "response.failed", last.name, "%v", rs.events)
	var failed struct {
		Response struct {
			ID    string
			Error struct{ Code, Message string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(last.data), &failed), last.data)
	assert.NotEmpty(t, failed.Response.ID, "the failure names the response the stream started")
	assert.Equal(t, "shutting_down", failed.Response.Error.Code)
	assert.Contains(t, failed.Response.Error.Message, "shutting down")

	// openai-go raises the error chunk.
	select {
	case err := <-sdkErr:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "shutting down")
	case <-time.After(10 * time.Second):
		t.Fatal("the official client's stream was still open after the process stopped")
	}

	select {
	case err := <-wholeErr:
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
		assert.Equal(t, "shutting_down", apiErr.Code)
	case <-time.After(10 * time.Second):
		t.Fatal("the whole answer's request was still open after the process stopped")
	}

	// What was streamed is billed, as for a stream the client left (the
	// requests that tried the listener before it closed were answered
	// whole), and every request the shutdown ended is recorded with what
	// its client got, the 503 shutting_down, not as one its client left.
	after := nodetest.Start(t, cfg, node.RoleCore)
	assert.Equal(t, 4, billedCut(t, after), "the four streams are billed what they delivered")
	var ended int
	for _, ev := range usageEvents(t, after) {
		if ev.GetStatus() == http.StatusOK {
			continue
		}
		ended++
		assert.EqualValues(t, http.StatusServiceUnavailable, ev.GetStatus(), "%v", ev)
		assert.Equal(t, "shutting_down", ev.GetErrorCode(), "%v", ev)
	}
	assert.Equal(t, 5, ended, "the four streams and the whole answer")
}

// billedCut is the number of usage events of streams cut before their end
// that sb's usage stream holds, each of them billed completion tokens.
func billedCut(t *testing.T, sb *nodetest.Instance) int {
	t.Helper()
	var cut int
	for _, ev := range usageEvents(t, sb) {
		if ev.GetPartial() {
			cut++
			assert.Positive(t, ev.GetCompletionTokens(), "%v", ev)
		}
	}
	return cut
}

// The shutdown timeout bounds the whole stop, counted from the signal: a
// gRPC stream held open by a silent upstream is closed when it is over, as
// the edge's streams are ended, not given another timeout after the edge
// has drained. What both streams delivered is billed.
func TestShutdownStopsWithinOneTimeoutWithAGRPCStreamOpen(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	// Long enough that a second timeout after the edge's drain shows
	// beyond the margin below.
	cfg.ShutdownTimeout = 4 * time.Second
	cfg.StallTimeout, cfg.FirstByteTimeout = time.Minute, time.Minute
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	up.Enqueue(pathChat, upstreamtest.StallAfter(2), upstreamtest.StallAfter(2))

	conn, err := grpc.NewClient(sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+gatewayKey(t, sb))
	stream, err := corev1.NewRouterClient(conn).ChatCompletions(ctx, &corev1.ChatCompletionsRequest{
		Body: []byte(`{"model":"` + chatModel + `","stream":true,"messages":[{"role":"user","content":"a long answer please"}]}`)})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.NoError(t, err, "the gRPC stream started")
	grpcEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				grpcEnded <- err
				return
			}
		}
	}()
	httpStream := streamOpen(t, sb, pathChat, `{"model":"`+chatModel+`","stream":true,"messages":[{"role":"user","content":"a long answer please"}]}`)
	select {
	case <-httpStream.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the HTTP stream did not start")
	}

	stopped := time.Now()
	sb.Stop() // fails the test when the process stops with an error
	took := time.Since(stopped)
	t.Logf("stopped in %v with a shutdown timeout of %v", took.Round(10*time.Millisecond), cfg.ShutdownTimeout)
	assert.Less(t, took, cfg.ShutdownTimeout+3*time.Second, "one shutdown timeout and a margin, not a second timeout for the gRPC server")

	select {
	case err := <-grpcEnded:
		assert.Error(t, err, "the gRPC stream was closed")
	case <-time.After(10 * time.Second):
		t.Fatal("the gRPC stream was still open after the process stopped")
	}
	select {
	case e := <-httpStream.ended:
		require.NoError(t, e.err, "the HTTP stream ended cleanly, not cut")
		assert.Contains(t, e.events[len(e.events)-1].data, "shutting_down")
	case <-time.After(10 * time.Second):
		t.Fatal("the HTTP stream was still open after the process stopped")
	}

	assert.Equal(t, 2, billedCut(t, nodetest.Start(t, cfg, node.RoleCore)), "both streams are billed what they delivered")
}
