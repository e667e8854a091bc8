package chat

import (
	"context"
	"encoding/json"
	"fmt"
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

// The stop sequences of a chat or Messages request, in the order pieces of
// text arrive: the text ends right before the first sequence to appear,
// one spanning pieces included, and text held back in case it began one is
// released when it did not.
func TestStopText(t *testing.T) {
	for _, tc := range []struct {
		name         string
		seqs, pieces []string
		want, seq    string
	}{
		{"in one piece", []string{"END"}, []string{"one two END three"}, "one two ", "END"},
		{"across pieces", []string{"</block>"}, []string{"yes</b", "lo", "ck>no"}, "yes", "</block>"},
		{"a piece per character", []string{"abc"}, strings.Split("xxabababcyy", ""), "xxabab", "abc"},
		{"the first of several", []string{"three", "two"}, []string{"one t", "wo three"}, "one ", "two"},
		{"the one complete first", []string{"bcd", "abcdef"}, []string{"xabcdef"}, "xa", "bcd"},
		{"a newline", []string{"\n"}, []string{"line one", "\nline two"}, "line one", "\n"},
		{"at the start", []string{"STOP"}, []string{"ST", "OP and more"}, "", "STOP"},
		{"a prefix only, released", []string{"</block>"}, []string{"a </bl", "ock"}, "a </block", ""},
		{"none", []string{"zz"}, []string{"plain ", "text"}, "plain text", ""},
		{"multi-byte", []string{"→|"}, []string{"é→", "|ü"}, "é", "→|"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stopText{seqs: tc.seqs}
			var got strings.Builder
			seq := ""
			for _, p := range tc.pieces {
				out, matched := s.push(p)
				got.WriteString(out)
				if matched != "" {
					seq = matched
					break
				}
			}
			if seq == "" {
				got.WriteString(s.flush())
			}
			assert.Equal(t, tc.want, got.String())
			assert.Equal(t, tc.seq, seq)
			whole, wholeSeq := cutText(strings.Join(tc.pieces, ""), tc.seqs)
			if tc.seq != "" {
				assert.Equal(t, tc.want, whole, "the whole text is cut where the pieces were")
			}
			assert.Equal(t, tc.seq, wholeSeq)
		})
	}
}

// A chat or Messages request with stop sequences reaches a Responses-only
// upstream (codex), which has none, without them; a Responses request
// keeps no stop of its own.
func TestStopOnResponsesUpstreamRequest(t *testing.T) {
	spec, ok := provider.NewRegistry().Lookup("codex")
	require.True(t, ok)
	for _, tc := range []struct {
		dialect Dialect
		body    string
		stops   []string
	}{
		{DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["END","","END","\n"]}`, []string{"END", "\n"}},
		{DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":"END"}`, []string{"END"}},
		{DialectMessages, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["</block>"]}`, []string{"</block>"}},
		{DialectResponses, `{"model":"m","input":"hi","stop":["END"]}`, nil},
	} {
		in, err := parse(tc.dialect, []byte(tc.body))
		require.NoError(t, err)
		assert.Equal(t, tc.stops, requestStops(in), tc.body)
		if tc.dialect == DialectResponses {
			continue
		}
		out, err := pick(tc.dialect, spec, "gpt-5").request(in, "gpt-5")
		require.NoError(t, err, tc.body)
		assert.NotContains(t, string(out), `"stop`, tc.body)
	}
}

// stopUpstream is a Responses-only upstream that streams events and then
// sends nothing more until the caller hangs up, which closed then reports.
func stopUpstream(t *testing.T, events ...string) (srv *httptest.Server, closed <-chan struct{}) {
	done := make(chan struct{})
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			_, _ = io.WriteString(w, "data: "+e+"\n\n")
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
		once.Do(func() { close(done) })
	}))
	t.Cleanup(srv.Close)
	return srv, done
}

// streamRecorder keeps a stream's events.
type streamRecorder struct {
	names  []string
	events []string
	whole  []byte
}

func (r *streamRecorder) Start(time.Duration) error { return nil }
func (r *streamRecorder) Chunk(event string, data []byte) error {
	r.names = append(r.names, event)
	r.events = append(r.events, string(data))
	return nil
}
func (r *streamRecorder) Completion(data []byte) error {
	r.whole = append([]byte(nil), data...)
	return nil
}

// answer is what a client reads of an answer, whole or streamed, in its
// dialect: the text, the tool calls' arguments, how it ended.
type answer struct {
	text, args, finish string
	seq                any
}

func readAnswer(t *testing.T, d Dialect, r *streamRecorder) answer {
	t.Helper()
	var a answer
	if r.whole != nil {
		if d == DialectChat {
			var c struct {
				Choices []struct {
					Message struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Function struct{ Arguments string } `json:"function"`
						} `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(r.whole, &c), "%s", r.whole)
			a.text, a.finish = c.Choices[0].Message.Content, c.Choices[0].FinishReason
			for _, tc := range c.Choices[0].Message.ToolCalls {
				a.args += tc.Function.Arguments
			}
			return a
		}
		var m struct {
			Content []struct {
				Type  string          `json:"type"`
				Text  string          `json:"text"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
			StopReason   string `json:"stop_reason"`
			StopSequence any    `json:"stop_sequence"`
		}
		require.NoError(t, json.Unmarshal(r.whole, &m), "%s", r.whole)
		for _, c := range m.Content {
			a.text += c.Text
			if c.Type == "tool_use" {
				a.args += string(c.Input)
			}
		}
		a.finish, a.seq = m.StopReason, m.StopSequence
		return a
	}
	for i, e := range r.events {
		if d == DialectChat {
			var c struct {
				Choices []struct {
					Delta struct {
						Content   string `json:"content"`
						ToolCalls []struct {
							Function struct{ Arguments string } `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal([]byte(e), &c), e)
			for _, ch := range c.Choices {
				a.text += ch.Delta.Content
				for _, tc := range ch.Delta.ToolCalls {
					a.args += tc.Function.Arguments
				}
				if ch.FinishReason != "" {
					a.finish = ch.FinishReason
				}
			}
			continue
		}
		var ev struct {
			Delta struct {
				Text         string `json:"text"`
				PartialJSON  string `json:"partial_json"`
				StopReason   string `json:"stop_reason"`
				StopSequence any    `json:"stop_sequence"`
			} `json:"delta"`
		}
		require.NoError(t, json.Unmarshal([]byte(e), &ev), e)
		a.text += ev.Delta.Text
		a.args += ev.Delta.PartialJSON
		if r.names[i] == "message_delta" {
			a.finish, a.seq = ev.Delta.StopReason, ev.Delta.StopSequence
		}
	}
	if d == DialectMessages {
		require.NotEmpty(t, r.names)
		assert.Equal(t, "message_stop", r.names[len(r.names)-1], "the stream ends as a whole one does")
	}
	return a
}

// runStop runs one attempt of a request of dialect d (streamed or not) with
// stop sequences against a Responses-only upstream that sends events.
func runStop(t *testing.T, d Dialect, stream bool, body string, events ...string) (Usage, *streamRecorder, <-chan struct{}, error) {
	t.Helper()
	srv, closed := stopUpstream(t, events...)
	spec := provider.Spec{Format: provider.FormatResponses, StreamOnly: true}
	in, err := parse(d, []byte(strings.Replace(body, `"stream":false`, `"stream":`+map[bool]string{true: "true", false: "false"}[stream], 1)))
	require.NoError(t, err)
	sink := &streamRecorder{}
	svc := &Service{opts: Options{StallTimeout: time.Minute, FirstEventTimeout: time.Minute}}
	a := &attempt{
		svc: svc, in: in, tr: pick(d, spec, "gpt-5"), t: routing.Target{Model: "gpt-5"},
		c:    &dispatch.Conn{Connection: &busv1.Connection{Id: "conn"}, Spec: spec, BaseURL: srv.URL, Client: srv.Client()},
		sink: sink, cp: &completion{s: svc, sink: sink, start: time.Now()},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := a.run(ctx)
	require.NoError(t, ctx.Err(), "the attempt waited for an upstream that would not end")
	return u, sink, closed, err
}

const (
	stopCreated = `{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`
	stopItem    = `{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}`
	stopPart    = `{"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}`
)

func stopDelta(text string) string {
	b, _ := json.Marshal(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text})
	return string(b)
}

// A chat or Messages request with stop sequences, to a Responses-only
// upstream (codex) that has none: the answer's text ends right before the
// first sequence, one split across the upstream's deltas included, and ends
// as a stop on a sequence does in the client's dialect (chat's "stop";
// Messages' stop_sequence, naming it). The upstream is hung up on there,
// and the answer is billed the gateway's estimate of what it delivered and
// of the request's text, as a whole answer, not a cut one.
func TestStopOnResponsesUpstreamEndsTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      Dialect
		stream bool
		body   string
		finish string
		seq    any
	}{
		{"chat, streamed", DialectChat, true, `{"model":"m","stream":false,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"stop":["<end of>","zzz"]}`, "stop", nil},
		{"chat, whole", DialectChat, false, `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}],"stop":"<end of>"}`, "stop", nil},
		{"messages, streamed", DialectMessages, true, `{"model":"m","stream":false,"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["zzz","<end of>"]}`, "stop_sequence", "<end of>"},
		{"messages, whole", DialectMessages, false, `{"model":"m","stream":false,"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["<end of>"]}`, "stop_sequence", "<end of>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, sink, closed, err := runStop(t, tc.d, tc.stream, tc.body,
				stopCreated, stopItem, stopPart, stopDelta("Hello wor"), stopDelta("ld <en"), stopDelta("d of> never"), stopDelta(" seen"))
			require.NoError(t, err)
			a := readAnswer(t, tc.d, sink)
			assert.Equal(t, "Hello world ", a.text)
			assert.Equal(t, tc.finish, a.finish)
			assert.Equal(t, tc.seq, a.seq)
			for _, e := range sink.events {
				assert.NotContains(t, e, "never")
				if tc.d == DialectChat {
					assert.NotContains(t, e, "stop_reason", "a chat answer says stop, as OpenAI's does")
				}
			}
			if tc.d == DialectChat && tc.stream {
				// The usage the client asked for is the gateway's estimate.
				require.NotEmpty(t, sink.events)
				assert.Contains(t, sink.events[len(sink.events)-1], `"completion_tokens":3,`)
			}
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream call was not closed")
			}
			assert.True(t, u.Estimated, "%+v", u)
			assert.False(t, u.Partial, "a whole answer: %+v", u)
			assert.EqualValues(t, 3, u.CompletionTokens, "12 characters delivered: %+v", u)
			assert.EqualValues(t, 1, u.PromptTokens, "2 characters of prompt: %+v", u)
			assert.EqualValues(t, 4, u.TotalTokens)
		})
	}
}

// Text held back in case it began a sequence reaches the client when it
// did not; tool calls' arguments are no text a sequence stops; and an
// answer that ends by itself keeps the upstream's usage.
func TestStopOnResponsesUpstreamReleasesHeldText(t *testing.T) {
	const call = `{"type":"response.output_item.added","output_index":1,"item":{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":""}}`
	args := func(s string) string {
		b, _ := json.Marshal(map[string]any{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": s})
		return string(b)
	}
	const completed = `{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[` +
		`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi <en"}]},` +
		`{"id":"fc_1","type":"function_call","call_id":"call_1","name":"f","arguments":"{\"q\":\"<end of>\"}"}],` +
		`"usage":{"input_tokens":10,"output_tokens":7,"total_tokens":17}}}`
	for _, tc := range []struct {
		name   string
		d      Dialect
		stream bool
		body   string
		finish string
	}{
		{"chat, streamed", DialectChat, true, `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}],"stop":["<end of>"]}`, "tool_calls"},
		{"chat, whole", DialectChat, false, `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}],"stop":["<end of>"]}`, "tool_calls"},
		{"messages, streamed", DialectMessages, true, `{"model":"m","stream":false,"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["<end of>"]}`, "tool_use"},
		{"messages, whole", DialectMessages, false, `{"model":"m","stream":false,"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["<end of>"]}`, "tool_use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, sink, _, err := runStop(t, tc.d, tc.stream, tc.body,
				stopCreated, stopItem, stopPart, stopDelta("Hi <"), stopDelta("en"),
				`{"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":"Hi <en"}`,
				call, args(`{"q":"<end`), args(` of>"}`), completed)
			require.NoError(t, err)
			a := readAnswer(t, tc.d, sink)
			assert.Equal(t, "Hi <en", a.text)
			assert.JSONEq(t, `{"q":"<end of>"}`, a.args)
			assert.Equal(t, tc.finish, a.finish)
			assert.False(t, u.Estimated, "%+v", u)
			assert.EqualValues(t, 17, u.TotalTokens)
		})
	}
}

// An upstream whose text moves to another content part without saying so
// (no content_part events between, only the deltas' content_index) is
// stopped part by part all the same, as a whole answer's parts are: a
// sequence spanning the two parts ends neither, and the streamed answer
// and the whole one end at the same place.
func TestStopOnResponsesUpstreamPartsUnannounced(t *testing.T) {
	partDelta := func(content int, text string) string {
		b, _ := json.Marshal(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": content, "delta": text})
		return string(b)
	}
	completed := func(parts ...string) string {
		var content []map[string]string
		for _, p := range parts {
			content = append(content, map[string]string{"type": "output_text", "text": p})
		}
		b, _ := json.Marshal(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "object": "response", "status": "completed",
			"output": []any{map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "content": content}},
			"usage":  map[string]int{"input_tokens": 10, "output_tokens": 7, "total_tokens": 17}}})
		return string(b)
	}
	bodies := map[Dialect]string{
		DialectChat:     `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}],"stop":["<end of>","END"]}`,
		DialectMessages: `{"model":"m","stream":false,"max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["<end of>","END"]}`,
	}
	for _, tc := range []struct {
		name   string
		events []string
		text   string
		// stopped: the answer ends at a sequence.
		stopped bool
	}{
		{"a sequence across the parts", []string{partDelta(0, "Hi <en"), partDelta(1, "d of> more"), completed("Hi <en", "d of> more")}, "Hi <end of> more", false},
		{"a sequence in the second part", []string{partDelta(0, "Hi <en"), partDelta(1, "d of> more END never"), partDelta(1, " seen")}, "Hi <end of> more ", true},
		{"the text back in the first part", []string{partDelta(0, "Hi <en"), partDelta(1, " and "), partDelta(0, "d of> more END never")}, "Hi <en and d of> more ", true},
	} {
		for _, d := range []Dialect{DialectChat, DialectMessages} {
			var answers []answer
			for _, stream := range []bool{true, false} {
				name := fmt.Sprintf("%s, %s, streamed %v", tc.name, d, stream)
				_, sink, _, err := runStop(t, d, stream, bodies[d], append([]string{stopCreated, stopItem, stopPart}, tc.events...)...)
				require.NoError(t, err, name)
				a := readAnswer(t, d, sink)
				assert.Equal(t, tc.text, a.text, name)
				want := map[Dialect]string{DialectChat: "stop", DialectMessages: "end_turn"}[d]
				if tc.stopped && d == DialectMessages {
					want = "stop_sequence"
				}
				assert.Equal(t, want, a.finish, name)
				answers = append(answers, a)
			}
			assert.Equal(t, answers[0], answers[1], "%s, %s: the streamed answer and the whole one", tc.name, d)
		}
	}
}

// A text delta whose part cannot be read is a malformed event, streamed as
// assembled, and none of its text reaches the client unstopped.
func TestStopOnResponsesUpstreamUnreadablePart(t *testing.T) {
	const bad = `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":"one","delta":"Hi <end of> more"}`
	body := `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}],"stop":["<end of>"]}`
	for _, stream := range []bool{true, false} {
		_, sink, _, err := runStop(t, DialectChat, stream, body, stopCreated, stopItem, stopPart, bad)
		require.Error(t, err, "streamed %v", stream)
		for _, e := range sink.events {
			assert.NotContains(t, e, "more", "streamed %v", stream)
		}
	}
}
