package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/sse"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// fakeStream is the body of a streamed chat answer of the fake upstream
// cmd/bench loads, to its streamed chat message, asked as the gateway asks
// (usage included): a role chunk, 18 content chunks, a finish chunk and a
// usage chunk.
func fakeStream(b *testing.B) []byte {
	return fakeBody(b, "/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"`+streamInput+`"}]}`)
}

// streamInput is cmd/bench's streamed chat message.
const streamInput = "The quick brown fox jumps over the lazy dog and then the dog sleeps under the tree"

// fakeBody is the fake upstream's answer to body at path (under /v1).
func fakeBody(b *testing.B, path, body string) []byte {
	up := upstreamtest.New(b, upstreamtest.WithoutRecording())
	req, err := http.NewRequest(http.MethodPost, up.URL()+path, strings.NewReader(body))
	require.NoError(b, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	return raw
}

// streamEvents are a stream's events, each data in its own slice.
func streamEvents(b *testing.B, raw []byte) []Event {
	var evs []Event
	rd := sse.NewReader(bytes.NewReader(raw), maxEvent)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		require.NoError(b, err)
		evs = append(evs, Event{Name: ev.Name, Data: bytes.Clone(ev.Data)})
	}
}

// discardSink takes a stream and keeps nothing.
type discardSink struct{ events int }

func (*discardSink) Start(time.Duration) error    { return nil }
func (*discardSink) Completion([]byte) error      { return errors.New("not a stream") }
func (s *discardSink) Chunk(string, []byte) error { s.events++; return nil }
func (s *discardSink) Events(evs []Event) error   { s.events += len(evs); return nil }

// The per-event work of a relayed chat stream of the fake upstream: each
// chunk read for its usage and finish reason and counted as delivered, the
// way the gateway did it before the walk (json.Valid, searches, a partial
// read, more searches) and with the walk; then the whole attempt, from the
// upstream's bytes to the sink.
func BenchmarkChatStreamEvents(b *testing.B) {
	raw := fakeStream(b)
	evs := streamEvents(b, raw)
	b.Logf("%d events, %d bytes", len(evs), len(raw))
	b.Run("events/before", func(b *testing.B) {
		for b.Loop() {
			var o beforeChunks
			var d delivered
			emit := func(event string, data []byte) error { d.add(event, data); return nil }
			for _, ev := range evs {
				if _, err := o.event(ev.Data, emit); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("events/walk", func(b *testing.B) {
		for b.Loop() {
			o := openAIChunks{includeUsage: true}
			var d delivered
			emit := func(event string, data []byte) error {
				n, ok := o.counted(event, data)
				if !ok {
					b.Fatal("not counted")
				}
				d.chars += n
				return nil
			}
			for _, ev := range evs {
				if _, err := o.event("", ev.Data, emit); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("attempt", func(b *testing.B) {
		svc := &Service{opts: Options{StallTimeout: time.Minute, FirstEventTimeout: time.Minute}}
		conn := &dispatch.Conn{Connection: &busv1.Connection{Id: "conn"}}
		tr := pick(DialectChat, provider.Spec{}, "m")
		for b.Loop() {
			sink := &discardSink{}
			a := &attempt{
				svc: svc, in: inbound{dialect: DialectChat, stream: true, includeUsage: true}, tr: tr,
				t: routing.Target{Model: "m"}, c: conn, sink: sink, cp: &completion{s: svc, sink: sink},
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			if _, err := a.stream(ctx, cancel, bytes.NewReader(raw)); err != nil {
				b.Fatal(err)
			}
			cancel(nil)
		}
	})
}

// The per-event work of relayed Messages and Responses streams of the fake
// upstream: each event read for its type and usage and counted as
// delivered, decoded as before the walk and walked.
func BenchmarkNativeStreamEvents(b *testing.B) {
	for _, s := range []struct {
		name, path, body string
		tr               func() eventTranslator
		before           func(data []byte) bool
	}{
		{"messages", "/messages", `{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"` + streamInput + `"}]}`,
			func() eventTranslator { return &anthropicEvents{} },
			func(data []byte) bool { _, ok := decodedAnthropic(data); return ok }},
		{"responses", "/responses", `{"model":"gpt-4o-mini","stream":true,"input":"` + streamInput + `"}`,
			func() eventTranslator { return &responsesEvents{} },
			func(data []byte) bool { _, ok := decodedResponses(data); return ok }},
	} {
		evs := streamEvents(b, fakeBody(b, s.path, s.body))
		require.Greater(b, len(evs), 10)
		b.Run(s.name+"/before", func(b *testing.B) {
			for b.Loop() {
				var d delivered
				for _, ev := range evs {
					if !s.before(ev.Data) {
						b.Fatal("malformed")
					}
					d.add(ev.Name, ev.Data)
				}
			}
		})
		b.Run(s.name+"/walk", func(b *testing.B) {
			for b.Loop() {
				tr := s.tr()
				ctr := tr.(counter)
				var d delivered
				emit := func(event string, data []byte) error {
					n, ok := ctr.counted(event, data)
					if !ok {
						n = deliveredChars(event, data)
					}
					d.chars += n
					return nil
				}
				for _, ev := range evs {
					if _, err := tr.event(ev.Name, ev.Data, emit); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// beforeChunks is openAIChunks.event as it was before the walk: the
// reference the benchmark compares with.
type beforeChunks struct {
	finished bool
	u        Usage
}

func (o *beforeChunks) event(data []byte, emit emitFunc) (bool, error) {
	if bytes.Equal(data, []byte("[DONE]")) {
		return true, nil
	}
	if !json.Valid(data) {
		return false, errMalformedEvent
	}
	hasUsage := beforeMentions(data, `"usage"`, `"usage":null`)
	hasFinish := beforeMentions(data, `"finish_reason"`, `"finish_reason":null`)
	hasError := bytes.HasPrefix(bytes.TrimSpace(data), []byte(`{"error"`))
	var c chunkFacts
	if hasUsage || hasFinish || hasError {
		c = inspectMembers(data)
	}
	if c.err {
		return false, errUpstreamEvent
	}
	if c.usage != nil {
		o.u = c.usage.usage()
	}
	if c.finished {
		o.finished = true
	}
	return false, emit("", data)
}

func beforeMentions(data []byte, name, unset string) bool {
	i := bytes.Index(data, []byte(name))
	return i >= 0 && !bytes.Contains(data[i:], []byte(unset))
}
