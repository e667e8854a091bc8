package chat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

func TestAssembleResponsesStream(t *testing.T) {
	item := `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}`
	sse := func(events ...string) string {
		var b strings.Builder
		for _, e := range events {
			b.WriteString("data: " + e + "\n\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, stream, want string
		bad                bool
	}{
		{"completed carries the output", sse(`{"type":"response.created","response":{"id":"r"}}`,
			`{"type":"response.completed","response":{"id":"r","object":"response","output":[`+item+`]}}`),
			`{"id":"r","object":"response","output":[` + item + `]}`, false},
		{"empty output filled from the done items", sse(`{"type":"response.output_item.done","output_index":0,"item":`+item+`}`,
			`{"type":"response.completed","response":{"id":"r","object":"response","output":[]}}`),
			`{"id":"r","object":"response","output":[` + item + `]}`, false},
		{"failed", sse(`{"type":"response.failed","response":{"id":"r"}}`), "", true},
		{"failed, with the backend's error", sse(`{"type":"response.failed","response":{"id":"r","error":{"code":"context_length_exceeded","message":"too long"}}}`), "", true},
		{"no completion", sse(`{"type":"response.created","response":{"id":"r"}}`), "", true},
		{"malformed", "data: {nope\n\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := 0
			got, err := toResponses{}.assemble(strings.NewReader(tc.stream), nil, func() { events++ }, func() {})
			if tc.bad {
				if strings.Contains(tc.name, "backend's error") {
					// The attempt passes it on with its status (failEvent).
					var ev *eventError
					require.ErrorAs(t, err, &ev)
					assert.Equal(t, 400, ev.status, "the client's to act on")
					assert.Contains(t, string(ev.body), "context_length_exceeded")
					return
				}
				if errors.Is(err, errUpstreamEvent) {
					return // an error without its message: the attempt's 502 (failEvent)
				}
				var ue *credential.UpstreamError
				require.True(t, errors.As(err, &ue), "%v", err)
				assert.Equal(t, 502, ue.Status, "the next connection may try")
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
			assert.Positive(t, events)
		})
	}
}

// wholeRecorder is a Sink that keeps a whole answer.
type wholeRecorder struct{ completion []byte }

func (r *wholeRecorder) Start(time.Duration) error    { return nil }
func (r *wholeRecorder) Chunk(string, []byte) error   { return errors.New("not a whole answer") }
func (r *wholeRecorder) Completion(data []byte) error { r.completion = data; return nil }

// A whole answer assembled from the stream of an upstream that only
// streams (the ChatGPT backend of codex) is not given up while the upstream
// says it is alive with keep-alive comments, past the first event timeout
// before its first event and past the stall timeout after it; silent, it
// still gives way to the next connection.
func TestAssembledAnswerKeepAliveComments(t *testing.T) {
	const first, stall = 300 * time.Millisecond, 100 * time.Millisecond
	const created = `{"type":"response.created","response":{"id":"r"}}`
	const completed = `{"type":"response.completed","response":{"id":"r","object":"response","output":[{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}]}}`
	ask := func(t *testing.T, steps ...any) (*wholeRecorder, error) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for _, s := range steps {
				switch s := s.(type) {
				case string:
					_, _ = io.WriteString(w, s)
					w.(http.Flusher).Flush()
				case time.Duration:
					select {
					case <-time.After(s):
					case <-r.Context().Done():
						return
					}
				case hang:
					<-r.Context().Done()
					return
				}
			}
		}))
		t.Cleanup(srv.Close)
		spec := provider.Spec{Format: provider.FormatResponses, StreamOnly: true}
		in, err := parse(DialectResponses, []byte(`{"model":"m","input":"hi"}`))
		require.NoError(t, err)
		sink := &wholeRecorder{}
		svc := &Service{opts: Options{StallTimeout: stall, FirstEventTimeout: first}}
		a := &attempt{
			svc: svc, in: in, tr: pick(DialectResponses, spec, "m"), t: routing.Target{Model: "m"},
			c:    &dispatch.Conn{Connection: &busv1.Connection{Id: "conn"}, Spec: spec, BaseURL: srv.URL, Client: srv.Client()},
			sink: sink, cp: &completion{s: svc, sink: sink, start: time.Now()},
		}
		_, err = a.run(context.Background())
		return sink, err
	}

	sink, err := ask(t, steps(thinking(2*first), sseOf(created), thinking(3*stall), sseOf(completed))...)
	require.NoError(t, err)
	assert.Contains(t, string(sink.completion), `"text":"hi"`)

	_, err = ask(t, steps(thinking(first/2), hang{})...)
	var up *credential.UpstreamError
	require.True(t, errors.As(err, &up), "%T %v", err, err)
	assert.Equal(t, http.StatusBadGateway, up.Status, "the next connection may answer")
}

// A Claude subscription's requests begin their system prompt with Claude
// Code's identity line, once: whatever shape the client sent it in. Claude
// Code's own requests go up as they came, whichever of its identity lines
// they carry (`claude -p` names itself an Agent SDK agent).
func TestFitBodySystemFirst(t *testing.T) {
	const id = "You are Claude Code, Anthropic's official CLI for Claude."
	spec, ok := provider.NewRegistry().Lookup("claude")
	require.True(t, ok)
	require.Equal(t, id, spec.SystemFirst)
	const billing = `{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.330.603; cc_entrypoint=sdk-cli;"}`
	const agent = `{"type":"text","text":"You are a Claude agent, built on Anthropic's Claude Agent SDK.","cache_control":{"type":"ephemeral","ttl":"1h"}}`
	for _, tc := range []struct{ name, in, want string }{
		{"no system", `{"model":"m"}`, `[{"text":"` + id + `","type":"text"}]`},
		{"null", `{"system":null}`, `[{"text":"` + id + `","type":"text"}]`},
		{"empty string", `{"system":""}`, `[{"text":"` + id + `","type":"text"}]`},
		{"string", `{"system":"Be brief."}`, `[{"text":"` + id + `","type":"text"},{"text":"Be brief.","type":"text"}]`},
		{"string with it", `{"system":"` + id + ` More."}`, `"` + id + ` More."`},
		{"blocks", `{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}`,
			`[{"text":"` + id + `","type":"text"},{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`},
		{"blocks with it second", `{"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=1;"},{"type":"text","text":"` + id + `"}]}`,
			`[{"type":"text","text":"x-anthropic-billing-header: cc_version=1;"},{"type":"text","text":"` + id + `"}]`},
		{"the Agent SDK's", `{"system":"You are Claude Code, Anthropic's official CLI for Claude, running within the Claude Agent SDK."}`,
			`"You are Claude Code, Anthropic's official CLI for Claude, running within the Claude Agent SDK."`},
		{"claude -p's", `{"system":[` + billing + `,` + agent + `]}`, `[` + billing + `,` + agent + `]`},
		{"another shape", `{"system":42}`, `42`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := fitBody([]byte(tc.in), spec, false)
			require.NoError(t, err)
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(out, &obj))
			assert.JSONEq(t, tc.want, string(obj["system"]))
		})
	}
	// Other providers' bodies are not touched.
	in := []byte(`{"system":"Be brief."}`)
	out, err := fitBody(in, provider.Spec{Format: provider.FormatAnthropic}, false)
	require.NoError(t, err)
	assert.Equal(t, string(in), string(out))
}
