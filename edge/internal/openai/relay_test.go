package openai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
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

func TestRelayFlushesAnEventWithoutWaitingForTheNext(t *testing.T) {
	w := &flushRecorder{header: http.Header{}, onFlush: make(chan string, 8)}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	release := make(chan struct{})
	calls := 0
	next := func() (event, error) {
		calls++
		switch calls {
		case 1:
			return event{data: []byte(`{"n":1}`)}, nil
		case 2:
			<-release // the upstream is silent until the client saw event 1
			return event{data: []byte(`{"n":2}`)}, nil
		}
		return event{}, io.EOF
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay(w, r, time.Hour, chatEvents, event{data: []byte(`{"n":0}`)}, next, nil)
	}()
	require.Equal(t, "data: {\"n\":0}\n\n", <-w.onFlush)
	require.Equal(t, "data: {\"n\":1}\n\n", <-w.onFlush, "a lone event is flushed at once")
	close(release)
	<-done
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, "data: {\"n\":0}\n\ndata: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: [DONE]\n\n", join(w.flushed)+w.pending.String())
	require.Zero(t, w.pending.Len(), "everything written was flushed")
}

func TestRelayWritesEveryEventInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 5, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := &flushRecorder{header: http.Header{}}
			r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
			i := 0
			var want bytes.Buffer
			want.WriteString("event: first\ndata: {}\n\n")
			next := func() (event, error) {
				if i == n {
					return event{}, io.EOF
				}
				i++
				return event{name: "delta", data: []byte(fmt.Sprintf(`{"i":%d}`, i))}, nil
			}
			for k := 1; k <= n; k++ {
				fmt.Fprintf(&want, "event: delta\ndata: {\"i\":%d}\n\n", k)
			}
			want.WriteString("data: [DONE]\n\n")
			relay(w, r, time.Hour, chatEvents, event{name: "first", data: []byte(`{}`)}, next, nil)
			require.Equal(t, want.String(), join(w.flushed))
			require.Zero(t, w.pending.Len(), "everything written was flushed")
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

// Events already there when one arrives go out in the same flush; an event
// with nothing behind it is flushed alone.
func TestRelayCoalescesWhatIsReady(t *testing.T) {
	w := &flushRecorder{header: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	i := 0
	next := func() (event, error) {
		i++
		if i > 4 {
			return event{}, io.EOF
		}
		return event{data: []byte(fmt.Sprintf(`{"n":%d}`, i))}, nil
	}
	// Events 1 and 2 come together, 3 alone, then 4 with the end.
	ready := func() bool { return i == 1 || i == 4 }
	relay(w, r, time.Hour, chatEvents, event{data: []byte(`{"n":0}`)}, next, ready)
	require.Equal(t, []string{
		"data: {\"n\":0}\n\n",
		"data: {\"n\":1}\n\ndata: {\"n\":2}\n\n",
		"data: {\"n\":3}\n\n",
		"data: {\"n\":4}\n\ndata: [DONE]\n\n",
	}, w.flushed)
}

// A silent stream gets keep-alive comments between its events.
func TestRelayKeepAliveWhileSilent(t *testing.T) {
	w := &flushRecorder{header: http.Header{}, onFlush: make(chan string, 8)}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	release := make(chan struct{})
	calls := 0
	next := func() (event, error) {
		calls++
		if calls == 1 {
			<-release
			return event{data: []byte(`{"n":1}`)}, nil
		}
		return event{}, io.EOF
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay(w, r, time.Millisecond, chatEvents, event{data: []byte(`{"n":0}`)}, next, nil)
	}()
	require.Equal(t, "data: {\"n\":0}\n\n", <-w.onFlush)
	require.Equal(t, ": keep-alive\n\n", <-w.onFlush)
	close(release)
	for s := range w.onFlush {
		if s == "data: [DONE]\n\n" {
			break
		}
	}
	<-done
}

// Relay buffers are reused between streams: a stream's answer holds its
// own events and nothing of an earlier or concurrent stream's.
func TestRelayBuffersDoNotLeakBetweenStreams(t *testing.T) {
	stream := func(secret string, n int) (got, want string) {
		w := &flushRecorder{header: http.Header{}}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		i := 0
		next := func() (event, error) {
			if i == n {
				return event{}, io.EOF
			}
			i++
			return event{data: []byte(fmt.Sprintf(`{"%s":%d}`, secret, i))}, nil
		}
		ready := func() bool { return i%3 != 0 } // batches of several events
		relay(w, r, time.Hour, chatEvents, event{data: []byte(`{"` + secret + `":0}`)}, next, ready)
		var b bytes.Buffer
		for k := 0; k <= n; k++ {
			fmt.Fprintf(&b, "data: {\"%s\":%d}\n\n", secret, k)
		}
		b.WriteString("data: [DONE]\n\n")
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
	one := func(n int) *corev1.ChatCompletionsResponse {
		return &corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Chunk{Chunk: []byte(fmt.Sprintf(`{"n":%d}`, n))}}
	}
	batch := func(ns ...int) *corev1.ChatCompletionsResponse {
		evs := &corev1.ChatEvents{}
		for _, n := range ns {
			evs.Events = append(evs.Events, &corev1.ChatEvent{Data: []byte(fmt.Sprintf(`{"n":%d}`, n))})
		}
		return &corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Events{Events: evs}}
	}
	for _, tc := range []struct {
		name  string
		first *corev1.ChatCompletionsResponse
		rest  []*corev1.ChatCompletionsResponse
		want  []string
	}{
		{"single, then a batch", one(0), []*corev1.ChatCompletionsResponse{batch(1, 2, 3), one(4)}, []string{
			"data: {\"n\":0}\n\n", "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\n", "data: {\"n\":4}\n\n", "data: [DONE]\n\n"}},
		{"a batch first", batch(0, 1), []*corev1.ChatCompletionsResponse{batch(2, 3)}, []string{
			"data: {\"n\":0}\n\ndata: {\"n\":1}\n\n", "data: {\"n\":2}\n\ndata: {\"n\":3}\n\n", "data: [DONE]\n\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushRecorder{header: http.Header{}}
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			stream := &fakeChatStream{msgs: tc.rest}
			er := &eventReader{stream: stream, m: new(corev1.ChatCompletionsResponse)}
			relay(w, r, time.Hour, chatEvents, er.take(tc.first), er.next, er.ready)
			require.Equal(t, tc.want, w.flushed)
		})
	}
}
