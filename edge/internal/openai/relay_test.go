package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// flushRecorder records what each flush sent to the client.
type flushRecorder struct {
	header  http.Header
	mu      sync.Mutex
	pending bytes.Buffer
	flushed []string
	onFlush chan string
}

func (f *flushRecorder) Header() http.Header { return f.header }
func (f *flushRecorder) WriteHeader(int)     {}
func (f *flushRecorder) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending.Write(b)
}
func (f *flushRecorder) Flush() {
	f.mu.Lock()
	s := f.pending.String()
	f.pending.Reset()
	f.flushed = append(f.flushed, s)
	f.mu.Unlock()
	if f.onFlush != nil {
		f.onFlush <- s
	}
}

// chunk and batch are messages of core's stream: one event, or events the
// upstream sent together.
func chunk(name, data string) *corev1.ChatCompletionsResponse {
	return &corev1.ChatCompletionsResponse{EventName: name, Event: &corev1.ChatCompletionsResponse_Chunk{Chunk: []byte(data)}}
}

func batch(data ...string) *corev1.ChatCompletionsResponse {
	evs := &corev1.ChatEvents{}
	for _, d := range data {
		evs.Events = append(evs.Events, &corev1.ChatEvent{Data: []byte(d)})
	}
	return &corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Events{Events: evs}}
}

// chanStream is core's stream as a network connection delivers it: Recv
// waits for the next message; a closed channel is the clean end, unless
// err is set.
type chanStream struct {
	grpc.ClientStream
	c   chan *corev1.ChatCompletionsResponse
	err error
}

func (s *chanStream) Recv() (*corev1.ChatCompletionsResponse, error) {
	m, ok := <-s.c
	if !ok {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	return m, nil
}

// chatWriter is a Chat Completions route's stream writer, without the
// upstream header.
func chatWriter(w http.ResponseWriter, r *http.Request, every time.Duration) *streamWriter {
	return &streamWriter{w: w, r: r, every: every, d: chatDialect{
		events: chatEvents,
		fail:   func(w http.ResponseWriter, err error) { FromError(err).Write(w) },
	}}
}

// Each message is flushed as it comes, without waiting for the next.
func TestRelayFlushesEachMessageAsItComes(t *testing.T) {
	w := &flushRecorder{header: http.Header{}, onFlush: make(chan string, 8)}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	stream := &chanStream{c: make(chan *corev1.ChatCompletionsResponse)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		chatWriter(w, r, time.Hour).from(stream)
	}()
	stream.c <- chunk("", `{"n":0}`)
	require.Equal(t, "data: {\"n\":0}\n\n", <-w.onFlush)
	stream.c <- chunk("", `{"n":1}`) // the upstream is silent until the client saw event 0
	require.Equal(t, "data: {\"n\":1}\n\n", <-w.onFlush, "a lone event is flushed at once")
	close(stream.c)
	<-done
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, "data: {\"n\":0}\n\ndata: {\"n\":1}\n\n", join(w.flushed), "every event flushed")
	require.Equal(t, "data: [DONE]\n\n", w.pending.String(), "the end is left to the server, which writes it with the response's end")
	require.Equal(t, "text/event-stream", w.header.Get("Content-Type"))
}

func TestRelayWritesEveryEventInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 5, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := &flushRecorder{header: http.Header{}}
			r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
			msgs := []*corev1.ChatCompletionsResponse{chunk("first", `{}`)}
			var want bytes.Buffer
			want.WriteString("event: first\ndata: {}\n\n")
			for k := 1; k <= n; k++ {
				msgs = append(msgs, chunk("delta", fmt.Sprintf(`{"i":%d}`, k)))
				fmt.Fprintf(&want, "event: delta\ndata: {\"i\":%d}\n\n", k)
			}
			chatWriter(w, r, time.Hour).from(&fakeChatStream{msgs: msgs})
			require.Equal(t, want.String(), join(w.flushed), "every event flushed")
			require.Equal(t, "data: [DONE]\n\n", w.pending.String())
		})
	}
}

func join(s []string) string {
	var b bytes.Buffer
	for _, x := range s {
		b.WriteString(x)
	}
	return b.String()
}

// A silent stream gets keep-alive comments between its events.
func TestRelayKeepAliveWhileSilent(t *testing.T) {
	w := &flushRecorder{header: http.Header{}, onFlush: make(chan string, 8)}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	stream := &chanStream{c: make(chan *corev1.ChatCompletionsResponse)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		chatWriter(w, r, time.Millisecond).from(stream)
	}()
	stream.c <- chunk("", `{"n":0}`)
	require.Equal(t, "data: {\"n\":0}\n\n", <-w.onFlush)
	require.Equal(t, ": keep-alive\n\n", <-w.onFlush)
	close(stream.c)
	for {
		select {
		case <-w.onFlush: // more keep-alives
			continue
		case <-done:
		}
		break
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, "data: [DONE]\n\n", w.pending.String())
}

// Relay buffers are reused between streams: a stream's answer holds its
// own events and nothing of an earlier or concurrent stream's.
func TestRelayBuffersDoNotLeakBetweenStreams(t *testing.T) {
	stream := func(secret string, n int) (got, want string) {
		w := &flushRecorder{header: http.Header{}}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		var msgs []*corev1.ChatCompletionsResponse
		var b bytes.Buffer
		for k := 0; k <= n; k += 3 { // batches of up to three events
			var evs []string
			for j := k; j <= n && j < k+3; j++ {
				evs = append(evs, fmt.Sprintf(`{"%s":%d}`, secret, j))
				fmt.Fprintf(&b, "data: {\"%s\":%d}\n\n", secret, j)
			}
			msgs = append(msgs, batch(evs...))
		}
		b.WriteString("data: [DONE]\n\n")
		chatWriter(w, r, time.Hour).from(&fakeChatStream{msgs: msgs})
		return join(w.flushed) + w.pending.String(), b.String()
	}
	long := string(bytes.Repeat([]byte("s"), 3000)) // fills most of a buffer
	got, want := stream(long, 20)
	require.Equal(t, want, got)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 50 {
				got, want := stream(fmt.Sprintf("g%dk%d", g, k), k%7)
				if got != want {
					t.Errorf("stream g%dk%d: got %q, want %q", g, k, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// fakeChatStream answers RecvMsg with its messages in turn, then io.EOF.
type fakeChatStream struct {
	grpc.ClientStream
	msgs []*corev1.ChatCompletionsResponse
}

func (s *fakeChatStream) Recv() (*corev1.ChatCompletionsResponse, error) {
	m := new(corev1.ChatCompletionsResponse)
	return m, s.RecvMsg(m)
}

func (s *fakeChatStream) RecvMsg(m any) error {
	if len(s.msgs) == 0 {
		return io.EOF
	}
	proto.Reset(m.(proto.Message))
	proto.Merge(m.(proto.Message), s.msgs[0])
	s.msgs = s.msgs[1:]
	return nil
}

// The events core sends together (ChatEvents) reach the client in order
// and in one flush; single events keep being flushed at once.
func TestRelayWritesABatchOfEventsInOneFlush(t *testing.T) {
	one := func(n int) *corev1.ChatCompletionsResponse { return chunk("", fmt.Sprintf(`{"n":%d}`, n)) }
	nums := func(ns ...int) *corev1.ChatCompletionsResponse {
		var evs []string
		for _, n := range ns {
			evs = append(evs, fmt.Sprintf(`{"n":%d}`, n))
		}
		return batch(evs...)
	}
	for _, tc := range []struct {
		name string
		msgs []*corev1.ChatCompletionsResponse
		want []string
	}{
		{"single, then a batch", []*corev1.ChatCompletionsResponse{one(0), nums(1, 2, 3), one(4)}, []string{
			"data: {\"n\":0}\n\n", "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\n", "data: {\"n\":4}\n\n"}},
		{"a batch first", []*corev1.ChatCompletionsResponse{nums(0, 1), nums(2, 3)}, []string{
			"data: {\"n\":0}\n\ndata: {\"n\":1}\n\n", "data: {\"n\":2}\n\ndata: {\"n\":3}\n\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushRecorder{header: http.Header{}}
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			chatWriter(w, r, time.Hour).from(&fakeChatStream{msgs: tc.msgs})
			require.Equal(t, tc.want, w.flushed)
			require.Equal(t, "data: [DONE]\n\n", w.pending.String())
		})
	}
}

// How a stream ends decides what the client gets: a whole answer as JSON,
// an error before any event in the route's error shape, an error after
// events in-band, and nothing more once the client is gone.
func TestStreamWriterEnds(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "every credential failed")
	t.Run("whole answer", func(t *testing.T) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		c := &corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Completion{Completion: []byte(`{"id":"x"}`)}}
		chatWriter(w, r, time.Hour).from(&fakeChatStream{msgs: []*corev1.ChatCompletionsResponse{c}})
		require.Equal(t, `{"id":"x"}`, w.Body.String())
		require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	})
	t.Run("error before any event", func(t *testing.T) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		s := &chanStream{c: make(chan *corev1.ChatCompletionsResponse), err: unavailable}
		close(s.c)
		chatWriter(w, r, time.Hour).from(s)
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		require.Contains(t, w.Body.String(), `"error"`)
		require.NotContains(t, w.Body.String(), "data:")
	})
	t.Run("error after an event", func(t *testing.T) {
		w := &flushRecorder{header: http.Header{}}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		s := &chanStream{c: make(chan *corev1.ChatCompletionsResponse, 1), err: unavailable}
		s.c <- chunk("", `{"n":0}`)
		close(s.c)
		chatWriter(w, r, time.Hour).from(s)
		require.Equal(t, []string{"data: {\"n\":0}\n\n"}, w.flushed)
		require.Contains(t, w.pending.String(), `data: {"error"`)
		require.NotContains(t, w.pending.String(), "[DONE]", "never a clean close after an error")
	})
	t.Run("client gone", func(t *testing.T) {
		w := &failingWriter{header: http.Header{}}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		s := &fakeChatStream{msgs: []*corev1.ChatCompletionsResponse{chunk("", `{"n":0}`), chunk("", `{"n":1}`)}}
		chatWriter(w, r, time.Hour).from(s)
		require.Equal(t, 1, w.writes, "nothing is written after a failed write")
		require.Len(t, s.msgs, 1, "nothing more is read either")
	})
}

// failingWriter is a client that went away: every write fails.
type failingWriter struct {
	header http.Header
	writes int
}

func (f *failingWriter) Header() http.Header { return f.header }
func (f *failingWriter) WriteHeader(int)     {}
func (f *failingWriter) Write([]byte) (int, error) {
	f.writes++
	return 0, io.ErrClosedPipe
}

// A Responses stream that fails names the response it started and the
// sequence number after the last event's, though its events are not
// decoded as they pass.
func TestResponsesFailureNamesTheStartedResponse(t *testing.T) {
	d := responsesEvents()
	for _, e := range []event{
		{"response.created", []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-x","created_at":7,"output":[]}}`)},
		{"response.output_text.delta", []byte(`{"type":"response.output_text.delta","sequence_number":1,"delta":"say \"sequence_number\": 99"}`)},
		{"response.output_text.delta", []byte(`{"type":"response.output_text.delta","sequence_number":2,"delta":"x"}`)},
		{"keep", []byte(`{"no":"number"}`)},
	} {
		d.seen(e)
	}
	out := string(d.failure(status.Error(codes.Unavailable, "upstream went away")))
	require.Contains(t, out, "event: response.failed\n")
	var ev struct {
		Seq      int64 `json:"sequence_number"`
		Response struct {
			ID        string `json:"id"`
			Model     string `json:"model"`
			CreatedAt int64  `json:"created_at"`
			Status    string `json:"status"`
		} `json:"response"`
	}
	data := out[strings.Index(out, "data: ")+len("data: "):]
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(data)), &ev))
	require.Equal(t, int64(3), ev.Seq)
	require.Equal(t, "resp_1", ev.Response.ID)
	require.Equal(t, "gpt-x", ev.Response.Model)
	require.Equal(t, int64(7), ev.Response.CreatedAt)
	require.Equal(t, "failed", ev.Response.Status)
}
