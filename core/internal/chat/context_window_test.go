package chat

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// windowUpstream is an Anthropic upstream whose model has a context window
// of window tokens and reads every request as input tokens: a request whose
// max_tokens passes what the window leaves is refused as Anthropic refuses
// it (with refusal's message, when set), another is answered "Fitted.",
// streamed or whole as asked. It records each request's max_tokens and
// thinking budget, and its body.
type windowUpstream struct {
	input, window int64
	refusal       string

	mu     sync.Mutex
	seen   []windowAsk
	bodies [][]byte
}

type windowAsk struct{ maxTokens, budget int64 }

func (u *windowUpstream) asks() []windowAsk {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]windowAsk(nil), u.seen...)
}

func (u *windowUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		MaxTokens int64 `json:"max_tokens"`
		Stream    bool  `json:"stream"`
		Thinking  *struct {
			BudgetTokens int64 `json:"budget_tokens"`
		} `json:"thinking"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ask := windowAsk{maxTokens: req.MaxTokens}
	if req.Thinking != nil {
		ask.budget = req.Thinking.BudgetTokens
	}
	u.mu.Lock()
	u.seen = append(u.seen, ask)
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	if u.input+req.MaxTokens > u.window {
		msg := u.refusal
		if msg == "" {
			msg = fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again", u.input, req.MaxTokens, u.window)
		}
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}, "request_id": "req_1"})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(b)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Fitted."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":2}}`, u.input)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":%d,\"output_tokens\":1}}}\n\n", u.input)
	_, _ = io.WriteString(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Fitted.\"}}\n\n"+
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"+
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

// sampling is the temperature, top_p and top_k of each request u was sent,
// as JSON (absent ones left out).
func (u *windowUpstream) sampling(t *testing.T) []string {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, b := range u.bodies {
		var req map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &req))
		picked := map[string]json.RawMessage{}
		for _, k := range []string{"temperature", "top_p", "top_k"} {
			if v, ok := req[k]; ok {
				picked[k] = v
			}
		}
		s, err := json.Marshal(picked)
		require.NoError(t, err)
		out = append(out, string(s))
	}
	return out
}

// askWindow runs one attempt of a request of dialect d for
// claude-sonnet-4-6 (an output limit of 128,000) on Anthropic against up.
func askWindow(t *testing.T, up *windowUpstream, d Dialect, body string) (Usage, *streamRecorder, error) {
	t.Helper()
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	spec, ok := provider.NewRegistry().Lookup("anthropic")
	require.True(t, ok)
	const model = "claude-sonnet-4-6"
	in, err := parse(d, []byte(body))
	require.NoError(t, err)
	sink := &streamRecorder{}
	svc := &Service{opts: Options{StallTimeout: time.Minute, FirstEventTimeout: time.Minute}}
	a := &attempt{
		svc: svc, in: in, tr: pick(d, spec, model), t: routing.Target{Model: model},
		c:    &dispatch.Conn{Connection: &busv1.Connection{Id: "conn"}, Spec: spec, BaseURL: srv.URL, Client: srv.Client()},
		sink: sink, cp: &completion{s: svc, sink: sink, start: time.Now()},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := a.run(ctx)
	return u, sink, err
}

// A request that names no output cap is sent the model's whole output limit
// (a stream's) or 4,096 tokens and a thinking budget (a whole answer's),
// which a long conversation's input leaves no room for in the context
// window: Anthropic refuses it with the numbers, and the gateway asks again,
// once and on the same connection, for what the window leaves, a thinking
// budget shrunk below it. The client gets the answer, billed once, where it
// got a 400 for a cap it never asked for.
func TestContextWindowRefusalOfTheGatewaysCapIsAskedAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect Dialect
		body    string
		want    []windowAsk
	}{
		{"chat, streamed", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
			[]windowAsk{{128000, 0}, {10000, 0}}},
		{"responses, streamed", DialectResponses, `{"model":"m","input":"hi","stream":true}`,
			[]windowAsk{{128000, 0}, {10000, 0}}},
		{"responses, streamed, thinking", DialectResponses, `{"model":"m","input":"hi","stream":true,"reasoning":{"effort":"high"}}`,
			[]windowAsk{{128000, 16384}, {10000, 8976}}},
		{"chat, whole, thinking", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high"}`,
			[]windowAsk{{4096 + 16384, 16384}, {10000, 8976}}},
		// Less room than the smallest thinking budget: answered without
		// thinking, as with room for an answer but not for a budget beside it.
		{"responses, streamed, no room to think", DialectResponses, `{"model":"m","input":"hi","stream":true,"reasoning":{"effort":"high"}}`,
			[]windowAsk{{128000, 16384}, {1000, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := int64(190000)
			if tc.want[1].maxTokens == 1000 {
				input = 199000
			}
			up := &windowUpstream{input: input, window: 200000}
			u, sink, err := askWindow(t, up, tc.dialect, tc.body)
			require.NoError(t, err)
			assert.Equal(t, tc.want, up.asks())
			got := string(sink.whole) + strings.Join(sink.events, "\n")
			assert.Contains(t, got, "Fitted.", "the client got the answer")
			assert.NotContains(t, got, "context limit")
			assert.EqualValues(t, input, u.PromptTokens, "the answered request's usage")
			assert.EqualValues(t, 2, u.CompletionTokens)
		})
	}
}

// What the gateway does not ask again: a cap the client chose (its own
// choice, refused as the client sent it), a refusal whose numbers cannot be
// read, and a window that leaves no room for an answer. The client gets the
// upstream's 400 unchanged, after one request.
func TestContextWindowRefusalPassedThrough(t *testing.T) {
	const unreadable = "input length and `max_tokens` exceed context limit, decrease input length or `max_tokens` and try again"
	for _, tc := range []struct {
		name      string
		dialect   Dialect
		body      string
		input     int64
		refusal   string
		maxTokens int64
	}{
		{"chat, the client's max_tokens", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":50000}`, 190000, "", 50000},
		{"chat, the client's max_completion_tokens", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_completion_tokens":50000}`, 190000, "", 50000},
		{"responses, the client's max_output_tokens", DialectResponses, `{"model":"m","input":"hi","stream":true,"max_output_tokens":50000}`, 190000, "", 50000},
		// encoding/json reads a member whose name folds to the field's as
		// the field, and so does the translation: the client's cap all the
		// same.
		{"chat, the client's max_tokens in another case", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"Max_Tokens":50000}`, 190000, "", 50000},
		{"chat, the client's max_completion_tokens folded", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_completion_toKenſ":50000}`, 190000, "", 50000},
		{"responses, the client's max_output_tokens in another case", DialectResponses, `{"model":"m","input":"hi","stream":true,"MAX_OUTPUT_TOKENS":50000}`, 190000, "", 50000},
		{"chat, unreadable", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, 190000, unreadable, 128000},
		{"responses, unreadable", DialectResponses, `{"model":"m","input":"hi","stream":true}`, 190000, unreadable, 128000},
		{"chat, another refusal", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, 190000, "prompt is too long: 190000 tokens > 200000 maximum", 128000},
		{"chat, the window is full", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, 200000, "", 128000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &windowUpstream{input: tc.input, window: 200000, refusal: tc.refusal}
			_, sink, err := askWindow(t, up, tc.dialect, tc.body)
			var ue *credential.UpstreamError
			require.True(t, errors.As(err, &ue), "%T %v", err, err)
			assert.Equal(t, http.StatusBadRequest, ue.Status)
			msg := tc.refusal
			if msg == "" {
				msg = fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > 200000, decrease input length or `max_tokens` and try again", tc.input, tc.maxTokens)
			}
			var body struct {
				Error struct{ Message, Type string }
			}
			require.NoError(t, json.Unmarshal(ue.Body, &body), "%s", ue.Body)
			assert.Equal(t, msg, body.Error.Message, "the upstream's refusal")
			assert.Equal(t, "invalid_request_error", body.Error.Type)
			require.Len(t, up.asks(), 1, "asked once")
			assert.EqualValues(t, tc.maxTokens, up.asks()[0].maxTokens)
			assert.Empty(t, sink.events)
		})
	}
}

// A request asked again that the upstream refuses again gets the second
// refusal: the gateway asks once more at most.
func TestContextWindowAskedAgainOnce(t *testing.T) {
	// The upstream reads the request as 196,000 tokens and says 195,000.
	up := &windowUpstream{input: 196000, window: 200000,
		refusal: "input length and `max_tokens` exceed context limit: 195000 + 128000 > 200000, decrease input length or `max_tokens` and try again"}
	_, _, err := askWindow(t, up, DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	var ue *credential.UpstreamError
	require.True(t, errors.As(err, &ue), "%T %v", err, err)
	assert.Equal(t, http.StatusBadRequest, ue.Status)
	assert.Equal(t, []windowAsk{{128000, 0}, {5000, 0}}, up.asks())
}

// Thinking on, the client's temperature and top_k are not sent (Anthropic
// refuses them beside thinking), nor a top_p under 0.95. A request asked
// again without thinking (the window leaves less room than the smallest
// budget) is sent them as a request without thinking is: the client's
// temperature (1 at most), top_k, and top_p when there is no temperature.
// A request asked again that still thinks is sent none of them.
func TestContextWindowAskedAgainWithoutThinkingSamplesAsTheClientAsked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect Dialect
		body    string
		input   int64
		want    []string
	}{
		{"chat, temperature and top_k", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"reasoning_effort":"high","temperature":0.2,"top_k":40}`,
			199000, []string{`{}`, `{"temperature":0.2,"top_k":40}`}},
		{"chat, whole, temperature past 1", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","temperature":1.5,"top_p":0.97}`,
			199000, []string{`{"top_p":0.97}`, `{"temperature":1}`}},
		{"chat, top_p alone", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"reasoning_effort":"high","top_p":0.5}`,
			199000, []string{`{}`, `{"top_p":0.5}`}},
		{"chat, the fields in another case", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"reasoning_effort":"high","Temperature":0.3}`,
			199000, []string{`{}`, `{"temperature":0.3}`}},
		{"responses, temperature", DialectResponses, `{"model":"m","input":"hi","stream":true,"reasoning":{"effort":"high"},"temperature":0.2}`,
			199000, []string{`{}`, `{"temperature":0.2}`}},
		// Responses has no top_k: its translation sends none, asked again too.
		{"responses, top_p and top_k", DialectResponses, `{"model":"m","input":"hi","stream":true,"reasoning":{"effort":"high"},"top_p":0.5,"top_k":40}`,
			199000, []string{`{}`, `{"top_p":0.5}`}},
		{"chat, still thinking", DialectChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"reasoning_effort":"high","temperature":0.2,"top_k":40}`,
			190000, []string{`{}`, `{}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &windowUpstream{input: tc.input, window: 200000}
			_, sink, err := askWindow(t, up, tc.dialect, tc.body)
			require.NoError(t, err)
			asks := up.asks()
			require.Len(t, asks, 2)
			assert.NotZero(t, asks[0].budget, "the first request thinks")
			assert.Equal(t, tc.input == 190000, asks[1].budget > 0, "the second thinks only with room for it")
			assert.Equal(t, tc.want, up.sampling(t))
			assert.Contains(t, string(sink.whole)+strings.Join(sink.events, "\n"), "Fitted.")
		})
	}
}
