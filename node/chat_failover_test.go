package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// chatModes are the two shapes every chat failover row is run in.
var chatModes = []struct {
	name   string
	stream bool
}{{"stream", true}, {"whole", false}}

// chatReply is a chat answer as a raw HTTP client sees it. Embedded
// Response holds the status, headers and, for a whole answer or an error
// before the stream, the body. A stream is summarised from its events.
type chatReply struct {
	nodetest.Response
	Events  []string       // stream: the data payloads, in order
	Lines   []string       // stream: every line, comments included
	Content string         // the assembled text
	Model   string         // the answer's model field
	Usage   map[string]any // the answer's usage, if any
	Done    bool           // stream: ended with [DONE]
}

// chatAsk sends a chat request for model with text, streamed or whole; a
// streamed request asks for usage so that the client sees it.
func chatAsk(t *testing.T, sb *nodetest.Instance, model, text string, stream bool) chatReply {
	t.Helper()
	body := map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": text}}}
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+pathChat, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := chatReply{Response: nodetest.Response{Status: resp.StatusCode, Header: resp.Header}}
	if !stream || resp.StatusCode != http.StatusOK {
		out.Body, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = json.Unmarshal(out.Body, &out.JSON)
		if resp.StatusCode == http.StatusOK {
			var c struct {
				Model   string `json:"model"`
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
				Usage map[string]any `json:"usage"`
			}
			require.NoError(t, json.Unmarshal(out.Body, &c), "%s", out.Body)
			out.Model, out.Usage = c.Model, c.Usage
			if len(c.Choices) > 0 {
				out.Content = c.Choices[0].Message.Content
			}
		}
		return out
	}
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		out.Lines = append(out.Lines, line)
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		out.Events = append(out.Events, payload)
		if payload == "[DONE]" {
			out.Done = true
			continue
		}
		var c struct {
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage map[string]any  `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(payload), &c), "every event is JSON: %s", payload)
		if len(c.Error) > 0 {
			_ = json.Unmarshal([]byte(payload), &out.JSON)
			continue
		}
		if c.Model != "" {
			out.Model = c.Model
		}
		if c.Usage != nil {
			out.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			out.Content += ch.Delta.Content
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// requireAnswer checks a successful answer, streamed or whole.
func requireAnswer(t *testing.T, r chatReply, text string) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Nil(t, r.JSON["error"], "no error: %v", r.JSON)
	assert.Equal(t, upstreamtest.EchoPrefix+text, r.Content)
	if r.Events != nil {
		assert.True(t, r.Done, "a clean end: %v", r.Events)
	}
}

func errorMessage(r chatReply) string {
	e, _ := r.JSON["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// The rows of reference/failover.md not covered by TestChatStreamFailures
// and TestChatFailoverBeforeFirstByte, each for a streamed and a whole
// request, against a primary that misbehaves and a healthy fallback.
func TestChatFailoverRows(t *testing.T) {
	rows := []struct {
		name string
		run  func(t *testing.T, p pair, stream bool)
	}{
		{"2 429 without Retry-After: fallback answers, primary on backoff", func(t *testing.T, p pair, stream bool) {
			p.primary.Enqueue(pathChat, upstreamtest.RateLimited(""))
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "a", stream), "a")
			assert.Equal(t, 1, p.fallback.Count(pathChat))
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "b", stream), "b")
			assert.Equal(t, 1, p.primary.Count(pathChat), "no second call during the cooldown")
			assert.Equal(t, 2, p.fallback.Count(pathChat))
		}},
		{"13 400 content filter: passed through, no fallback, no cooldown", func(t *testing.T, p pair, stream bool) {
			const msg = "The response was filtered due to the prompt triggering content management policy."
			p.primary.Enqueue(pathChat, upstreamtest.OpenAIError(400, "invalid_request_error", "content_filter", msg))
			r := chatAsk(t, p.sb, chatModel, "a", stream)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			assert.Equal(t, "content_filter", errorCode(r.Response))
			assert.Equal(t, "invalid_request_error", errorType(r.Response))
			assert.Equal(t, msg, errorMessage(r), "the upstream's body as it wrote it")
			assert.Zero(t, p.fallback.Count(pathChat), "no fallback")
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "b", stream), "b")
			assert.Equal(t, 2, p.primary.Count(pathChat), "no cooldown: the primary answers the next request")
			assert.Zero(t, p.fallback.Count(pathChat))
		}},
		{"15 primary flaps: traffic returns to it after its cooldown", func(t *testing.T, p pair, stream bool) {
			p.primary.Enqueue(pathChat, upstreamtest.RateLimited("1"))
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "a", stream), "a")
			assert.Equal(t, 1, p.fallback.Count(pathChat))
			require.Eventually(t, func() bool {
				r := chatAsk(t, p.sb, chatModel, "b", stream)
				return r.Status == http.StatusOK && p.primary.Count(pathChat) >= 2
			}, 10*time.Second, 100*time.Millisecond, "the primary is used again after its Retry-After")
			before := p.fallback.Count(pathChat)
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "c", stream), "c")
			assert.Equal(t, before, p.fallback.Count(pathChat), "the recovered primary serves again")
		}},
		{"16 fallback answered: model and usage of the answering connection", func(t *testing.T, p pair, stream bool) {
			p.primary.Enqueue(pathChat, upstreamtest.OpenAIError(500, "server_error", "", "boom"))
			p.fallback.Enqueue(pathChat, fallbackAnswer(stream))
			r := chatAsk(t, p.sb, chatModel, "billable", stream)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			assert.Equal(t, "fallback says hi", r.Content)
			assert.Equal(t, fallbackModel, r.Model, "the answering upstream's model")
			require.NotNil(t, r.Usage, "usage asked for, usage given")
			assert.EqualValues(t, 11, r.Usage["prompt_tokens"])
			assert.EqualValues(t, 7, r.Usage["completion_tokens"])
			assert.EqualValues(t, 18, r.Usage["total_tokens"])

			var evs []*busv1.UsageEvent
			require.Eventually(t, func() bool { evs = usageEvents(t, p.sb); return len(evs) >= 1 }, 5*time.Second, 20*time.Millisecond)
			require.Len(t, usageEvents(t, p.sb), 1, "one usage event per request, not per attempt")
			ev := evs[0]
			assert.Equal(t, p.fallbackID, ev.GetConnectionId(), "the connection that answered")
			assert.Equal(t, "openai", ev.GetProvider())
			assert.Equal(t, "gpt-4o-mini", ev.GetModel())
			assert.Equal(t, "chat.completions", ev.GetEndpoint())
			assert.EqualValues(t, 200, ev.GetStatus())
			assert.EqualValues(t, 2, ev.GetAttempts())
			assert.EqualValues(t, 11, ev.GetPromptTokens())
			assert.EqualValues(t, 7, ev.GetCompletionTokens())
			assert.EqualValues(t, 18, ev.GetTotalTokens())
		}},
		{"an error answered with a 200 status: a failed attempt, the fallback answers", func(t *testing.T, p pair, stream bool) {
			const body = `{"error":{"message":"upstream exploded","type":"server_error","code":null}}`
			if stream {
				p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, "data: "+body+"\n\n", "Content-Type", "text/event-stream"))
			} else {
				p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, body))
			}
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "a", stream), "a")
			assert.Equal(t, 1, p.primary.Count(pathChat))
			assert.Equal(t, 1, p.fallback.Count(pathChat), "the fallback answered")
		}},
		{"an error with its status in its code, answered with a 200 (OpenRouter): the status counts", func(t *testing.T, p pair, stream bool) {
			if stream {
				t.Skip("a stream's error event is a failed attempt whatever its code")
			}
			p.fallback.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, `{"error":{"message":"Rate limit exceeded","code":429}}`))
			p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, `{"error":{"message":"Rate limit exceeded","code":429}}`))
			r := chatAsk(t, p.sb, chatModel, "a", stream)
			require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
			assert.Contains(t, errorMessage(r), "rate limited", "both cooled as rate limited")
			assert.Equal(t, 1, p.primary.Count(pathChat))
			assert.Equal(t, 1, p.fallback.Count(pathChat))
		}},
		{"an error answered with a 200 status on every connection: the last one, its key scrubbed", func(t *testing.T, p pair, stream bool) {
			if stream {
				t.Skip("a stream's error event is covered by TestUpstreamStreamErrorsPassThrough")
			}
			p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, `{"error":{"message":"key sk-primary is blocked","type":"server_error"}}`))
			p.fallback.Enqueue(pathChat, upstreamtest.Status(http.StatusOK, `{"error":{"message":"key sk-fallback is blocked","type":"server_error"}}`))
			r := chatAsk(t, p.sb, chatModel, "a", stream)
			require.Equal(t, http.StatusBadGateway, r.Status, "%s", r.Body)
			assert.Contains(t, errorMessage(r), "is blocked", "the upstream's own error")
			assert.NotContains(t, string(r.Body), "sk-fallback", "the key an error echoes is scrubbed")
		}},
		{"19 every connection fails with mixed errors: the last upstream error", func(t *testing.T, p pair, stream bool) {
			p.primary.Enqueue(pathChat, upstreamtest.Overloaded())
			p.fallback.Enqueue(pathChat, upstreamtest.OpenAIError(500, "server_error", "", "fallback broke"))
			r := chatAsk(t, p.sb, chatModel, "a", stream)
			require.Equal(t, http.StatusInternalServerError, r.Status, "%s", r.Body)
			assert.Equal(t, "fallback broke", errorMessage(r))
			assert.Equal(t, "server_error", errorType(r.Response))
			assert.Equal(t, 1, p.primary.Count(pathChat))
			assert.Equal(t, 1, p.fallback.Count(pathChat))
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			// Each row has pairs of its own, and most of its time is waits
			// (cooldowns, Retry-After): rows run side by side.
			t.Parallel()
			for _, m := range chatModes {
				t.Run(m.name, func(t *testing.T) { row.run(t, newPair(t), m.stream) })
			}
		})
	}
}

// fallbackModel is the model a scripted fallback answer names: a dated
// version, as OpenAI answers, unlike the primary's.
const fallbackModel = "gpt-4o-mini-2024-07-18"

// fallbackAnswer is a scripted answer with distinctive model and usage.
func fallbackAnswer(stream bool) upstreamtest.Fault {
	const usage = `{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}`
	if !stream {
		return upstreamtest.Status(http.StatusOK, `{"id":"chatcmpl-f","object":"chat.completion","created":1,"model":"`+fallbackModel+
			`","choices":[{"index":0,"message":{"role":"assistant","content":"fallback says hi"},"finish_reason":"stop"}],"usage":`+usage+`}`)
	}
	chunk := func(choices, usage string) string {
		return `data: {"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"` + fallbackModel +
			`","choices":[` + choices + `],"usage":` + usage + "}\n\n"
	}
	body := chunk(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`, "null") +
		chunk(`{"index":0,"delta":{"content":"fallback "},"finish_reason":null}`, "null") +
		chunk(`{"index":0,"delta":{"content":"says hi"},"finish_reason":null}`, "null") +
		chunk(`{"index":0,"delta":{},"finish_reason":"stop"}`, "null") +
		chunk(``, usage) +
		"data: [DONE]\n\n"
	return upstreamtest.Status(http.StatusOK, body, "Content-Type", "text/event-stream")
}

// Row 16, the failed attempt not billed: a primary whose stream reported
// usage, then broke before anything reached the client, is not billed; the
// fallback that answered is.
func TestChatFailedAttemptNotBilled(t *testing.T) {
	p := newPair(t)
	// A usage-only chunk the client did not ask for (the gateway keeps it
	// for its accounting), then the end of the body: nothing was relayed.
	p.primary.Enqueue(pathChat, upstreamtest.Status(http.StatusOK,
		`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":500,"completion_tokens":500,"total_tokens":1000}}`+"\n\n",
		"Content-Type", "text/event-stream"))
	status, events := streamChat(t, p.sb, "x")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "[DONE]", events[len(events)-1])
	assert.Equal(t, 1, p.fallback.Count(pathChat))
	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, p.sb); return len(evs) >= 1 }, 5*time.Second, 20*time.Millisecond)
	require.Len(t, usageEvents(t, p.sb), 1)
	assert.Equal(t, p.fallbackID, evs[0].GetConnectionId())
	assert.Less(t, evs[0].GetTotalTokens(), int64(1000), "the primary's usage is not billed")
	assert.Positive(t, evs[0].GetTotalTokens())
}

// Row 7 for a stream: chunks that arrive slowly, each below the stall
// timeout, make the whole answer, with no error and no fallback, even when
// the stream as a whole lasts longer than the stall timeout.
func TestChatSlowStreamIsNotAStall(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	delay := sb.Config.StallTimeout / 5
	slow := upstreamtest.New(t, upstreamtest.WithChunkDelay(delay))
	fallback := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "slow", "apiKey": "k", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": slow.URL()}})
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "fallback", "apiKey": "k", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": fallback.URL()}})
	const text = "one two three four"
	start := time.Now()
	r := chatAsk(t, sb, chatModel, text, true)
	requireAnswer(t, r, text)
	assert.Greater(t, time.Since(start), sb.Config.StallTimeout, "the stream as a whole outlasted the stall timeout")
	assert.Zero(t, fallback.Count(pathChat), "no needless fallback")

	client := sdk(t, sb)
	stream := client.Chat.Completions.NewStreaming(context.Background(), userMessage(text))
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, upstreamtest.EchoPrefix+text, acc.Choices[0].Message.Content)
	assert.Zero(t, fallback.Count(pathChat))
}

// Keep-alives: a stream silent for longer than the edge's keep-alive
// interval (but below the stall timeout) carries ": keep-alive" comments
// between its events, and the official clients ignore them.
func TestChatKeepAlives(t *testing.T) {
	start := func(t *testing.T) *nodetest.Instance {
		sb := nodetest.Serve(t, t.TempDir())
		require.Less(t, 3*sb.Config.KeepAliveEvery, sb.Config.StallTimeout)
		up := upstreamtest.New(t, upstreamtest.WithChunkDelay(3*sb.Config.KeepAliveEvery))
		sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
			"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
		return sb
	}
	const text = "keep me alive please"

	t.Run("raw", func(t *testing.T) {
		sb := start(t)
		r := chatAsk(t, sb, chatModel, text, true)
		requireAnswer(t, r, text)
		var data, keepAlives []int
		for i, line := range r.Lines {
			switch {
			case strings.HasPrefix(line, "data: "):
				data = append(data, i)
			case line == ": keep-alive":
				keepAlives = append(keepAlives, i)
			case line == "":
			default:
				t.Errorf("unexpected line %q", line)
			}
		}
		require.NotEmpty(t, keepAlives, "keep-alive comments mid-stream: %q", r.Lines)
		assert.Greater(t, keepAlives[0], data[0], "none before the first event")
		assert.Less(t, keepAlives[len(keepAlives)-1], data[len(data)-1], "none after the end")
		for _, i := range keepAlives {
			assert.Empty(t, r.Lines[i+1], "a comment is its own block")
		}
	})

	t.Run("openai-go", func(t *testing.T) {
		sb := start(t)
		client := sdk(t, sb)
		stream := client.Chat.Completions.NewStreaming(context.Background(), userMessage(text))
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		require.NoError(t, stream.Err())
		require.Len(t, acc.Choices, 1)
		assert.Equal(t, upstreamtest.EchoPrefix+text, acc.Choices[0].Message.Content)
		assert.Equal(t, "stop", string(acc.Choices[0].FinishReason))
	})

	t.Run("npm", func(t *testing.T) {
		nodetest.NPM(t) // skips without node, before starting anything
		sb := start(t)
		key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "npm"})
		require.Equal(t, http.StatusCreated, key.Status, "%s", key.Body)
		res := sb.NPMClient(key.JSON["key"].(string)).Op(t, "chat.mjs", map[string]any{"model": chatModel, "stream": true,
			"messages": []map[string]any{{"role": "user", "content": text}}})
		require.Nil(t, res.Error, "%+v", res.Error)
		var s npmStream
		res.Decode(t, &s)
		assert.Equal(t, upstreamtest.EchoPrefix+text, s.Content)
		assert.Equal(t, "stop", s.FinishReason)
	})
}

// Rows 17 and 18 for chat: an OAuth connection whose upstream refuses its
// access token.
func TestChatRefreshOn401(t *testing.T) {
	const oauthChatModel = "openai-compatible-oauth/gpt-4o-mini"
	for _, m := range chatModes {
		t.Run("17 refresh succeeds: retried once, 200/"+m.name, func(t *testing.T) {
			up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
			tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
			sb := nodetest.Serve(t, t.TempDir())
			id := createOAuthConnection(t, sb, up.URL(), tokens.URL())

			r := chatAsk(t, sb, oauthChatModel, "hi", m.stream)
			requireAnswer(t, r, "hi")
			assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1)}, tokens.grants(), "one refresh-token grant")
			assert.Equal(t, []string{"Bearer " + oauthOldAccess, "Bearer " + oauthNewAccess}, bearers(up, upstreamtest.PathChatCompletions),
				"refused once, retried once with the new token")
			assert.Equal(t, false, connection(t, sb, id)["needsRelogin"])

			var evs []*busv1.UsageEvent
			require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) >= 1 }, 5*time.Second, 20*time.Millisecond)
			require.Len(t, usageEvents(t, sb), 1)
			assert.Equal(t, id, evs[0].GetConnectionId())
			assert.EqualValues(t, 200, evs[0].GetStatus())

			// The new token serves the next request without a refresh.
			requireAnswer(t, chatAsk(t, sb, oauthChatModel, "again", m.stream), "again")
			assert.Len(t, tokens.grants(), 1)
		})
		t.Run("18 refresh refused: fallback, needs re-login/"+m.name, func(t *testing.T) {
			const fallbackKey = "sk-fallback-2f9a61"
			up := upstreamtest.New(t, upstreamtest.WithAPIKey(fallbackKey))
			tokens := newFakeTokenEndpoint(t, tokenAnswer{
				status: http.StatusBadRequest,
				body:   `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`,
			})
			sb := nodetest.Serve(t, t.TempDir())
			id := createOAuthConnection(t, sb, up.URL(), tokens.URL())
			keyID := sb.CreateConnection(t, map[string]any{
				"provider": "openai-compatible-oauth", "name": "key", "apiKey": fallbackKey, "priority": 2,
				"providerSpecificData": map[string]any{"baseUrl": up.URL()},
			})

			r := chatAsk(t, sb, oauthChatModel, "hi", m.stream)
			requireAnswer(t, r, "hi")
			assert.Equal(t, []url.Values{refreshGrant(oauthRefresh1)}, tokens.grants())
			assert.Equal(t, []string{"Bearer " + oauthOldAccess, "Bearer " + fallbackKey}, bearers(up, upstreamtest.PathChatCompletions),
				"the OAuth connection first, then the fallback")
			require.Eventually(t, func() bool {
				return connection(t, sb, id)["needsRelogin"] == true
			}, 10*time.Second, 20*time.Millisecond, "the OAuth connection needs a new login")

			var evs []*busv1.UsageEvent
			require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) >= 1 }, 5*time.Second, 20*time.Millisecond)
			assert.Equal(t, keyID, evs[0].GetConnectionId(), "billed to the connection that answered")

			// Routing now skips it: no call with the old token, no new refresh.
			requireAnswer(t, chatAsk(t, sb, oauthChatModel, "again", m.stream), "again")
			assert.Len(t, tokens.grants(), 1)
			assert.Equal(t, []string{"Bearer " + oauthOldAccess, "Bearer " + fallbackKey, "Bearer " + fallbackKey}, bearers(up, upstreamtest.PathChatCompletions))
		})
	}
}

// A combo for chat tries its models in order with the before-first-byte
// rule: the first model's connections all rate limited, the second model
// answers; a 400 of the first model is the request's own and ends the walk.
func TestChatComboFallsThroughToTheNextModel(t *testing.T) {
	for _, m := range chatModes {
		t.Run(m.name, func(t *testing.T) {
			sb := nodetest.Serve(t, t.TempDir())
			first := upstreamtest.New(t)
			second := upstreamtest.New(t)
			for _, name := range []string{"a1", "a2"} {
				sb.CreateConnection(t, map[string]any{"provider": "openai", "name": name, "apiKey": "k",
					"providerSpecificData": map[string]any{"baseUrl": first.URL()}})
			}
			sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-b", "name": "b",
				"providerSpecificData": map[string]any{"baseUrl": second.URL(), "prefix": "local", "enabledModels": []string{"llama-3"}}})
			require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{"combos": []map[string]any{
				{"name": "chatter", "models": []string{chatModel, "local/llama-3"}},
			}}).Status)

			requireAnswer(t, chatAsk(t, sb, "chatter", "first", m.stream), "first")
			assert.Equal(t, 1, first.Count(pathChat), "the combo's first model answers when it can")
			assert.Zero(t, second.Count(pathChat))

			first.SetDefault(pathChat, upstreamtest.RateLimited("60"))
			r := chatAsk(t, sb, "chatter", "second", m.stream)
			requireAnswer(t, r, "second")
			assert.Equal(t, 3, first.Count(pathChat), "both connections of the first model were tried")
			require.Equal(t, 1, second.Count(pathChat), "the combo's second model answered")
			var sent map[string]any
			require.NoError(t, json.Unmarshal(second.Requests()[0].Body, &sent))
			assert.Equal(t, "llama-3", sent["model"])
			assert.Equal(t, "llama-3", r.Model)

			// A request error of the first model is the client's: no next model.
			first.SetDefault(pathChat, upstreamtest.OK())
			for _, name := range []string{"a1", "a2"} {
				require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/providers/"+connectionID(t, sb, name)+"/cooldowns", nil).Status)
			}
			first.Enqueue(pathChat, upstreamtest.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "too long"))
			r = chatAsk(t, sb, "chatter", "third", m.stream)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			assert.Equal(t, "context_length_exceeded", errorCode(r.Response))
			assert.Equal(t, 1, second.Count(pathChat), "the walk ended at the first model")
		})
	}
}

// thinkingUpstream is an OpenAI-shaped upstream that, alive but thinking,
// sends SSE keep-alive comments (OpenRouter's ": OPENROUTER PROCESSING")
// and no event: for before before its first chunk, for during between its
// first and its last. It thinks on its first call only; calls counts them.
func thinkingUpstream(t *testing.T, before, during time.Duration) (up *httptest.Server, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		before, during := before, during
		if calls.Add(1) > 1 {
			before, during = 0, 0
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		thinking := func(d time.Duration) {
			for end := time.Now().Add(d); time.Now().Before(end); {
				fmt.Fprint(w, ": OPENROUTER PROCESSING\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		chunk := func(content, finish string) {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]}\n\n", content, finish)
			w.(http.Flusher).Flush()
		}
		thinking(before)
		chunk("Let me think. ", "null")
		thinking(during)
		chunk("Done.", `"stop"`)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	return up, calls
}

// Rows 7 and 9 are about silence: an upstream that thinks for longer than
// the stall timeout, and says so with keep-alive comments, is alive. Its
// answer reaches the client whole, with no stream_stalled and no fallback,
// where the gateway, blind to comments, cut the answer at the stall timeout
// and cooled the connection while the upstream was still answering.
func TestChatKeepAliveCommentsAreNotAStall(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	stall := sb.Config.StallTimeout
	up, calls := thinkingUpstream(t, 0, stall+stall/2)
	fallback := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "thinking", "apiKey": "k", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "fallback", "apiKey": "k", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": fallback.URL()}})

	r := chatAsk(t, sb, chatModel, "think hard", true)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Nil(t, r.JSON["error"], "an in-band error: %v", r.JSON)
	assert.Equal(t, "Let me think. Done.", r.Content)
	assert.True(t, r.Done)

	r = chatAsk(t, sb, chatModel, "next", true)
	assert.True(t, r.Done, "%v", r.Events)
	assert.EqualValues(t, 2, calls.Load(), "the thinking connection was not cooled: it answers the next request")
	assert.Zero(t, fallback.Count(pathChat))
}

// Row 6 is about an upstream that never answers: one that thinks for
// longer than the first-byte timeout before its first chunk, and says so
// with keep-alive comments, is not given up for the fallback (which would
// have the user pay for the same question twice); its answer is the
// client's.
func TestChatKeepAliveCommentsBeforeTheFirstChunkKeepTheConnection(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	first := sb.Config.FirstByteTimeout
	up, _ := thinkingUpstream(t, first+first/2, 0)
	fallback := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "thinking", "apiKey": "k", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "fallback", "apiKey": "k", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": fallback.URL()}})

	r := chatAsk(t, sb, chatModel, "think hard", true)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Nil(t, r.JSON["error"], "an in-band error: %v", r.JSON)
	assert.Equal(t, "Let me think. Done.", r.Content)
	assert.True(t, r.Done)
	assert.Zero(t, fallback.Count(pathChat), "no fallback while the upstream is visibly alive")
}

// Row 6 is about an upstream that never answers, and a whole answer's
// upstream sends its headers only once the answer is written: with a
// whole-answer timeout longer than the first-byte one, one that takes
// longer than the first-byte timeout to write it (a reasoning model
// thinking, a long answer) is waited on, not given up for the fallback
// (which would have the user pay for the same question twice) nor cooled.
// A stream's upstream still has the first-byte timeout to start.
func TestWholeAnswersOutlastTheFirstByteTimeout(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.FirstByteTimeout = 500 * time.Millisecond
	cfg.WholeAnswerTimeout = 4 * time.Second
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	primary, fallback := upstreamtest.New(t), upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "primary", "apiKey": "k", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": primary.URL()}})
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "fallback", "apiKey": "k", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": fallback.URL()}})
	slow := upstreamtest.SlowFirstByte(3 * cfg.FirstByteTimeout)

	primary.Enqueue(pathChat, slow)
	requireAnswer(t, chatAsk(t, sb, chatModel, "think hard", false), "think hard")
	assert.Equal(t, 1, primary.Count(pathChat), "one upstream call")
	assert.Zero(t, fallback.Count(pathChat), "no fallback for a whole answer still being written")

	primary.Enqueue(pathEmbed, slow)
	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "a long batch"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Zero(t, fallback.Count(pathEmbed), "no fallback for embeddings still being computed")

	primary.Enqueue(pathTranscriptions, slow)
	ct, form := multipartForm(t, wav(1), "model", sttModel)
	r = sb.Do(t, http.MethodPost, pathTranscriptions, string(form), "Content-Type", ct)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Zero(t, fallback.Count(pathTranscriptions), "no fallback for audio still being transcribed")

	requireAnswer(t, chatAsk(t, sb, chatModel, "next", false), "next")
	assert.Equal(t, 2, primary.Count(pathChat), "the primary was not cooled: it answers the next request")
	assert.Zero(t, fallback.Count(pathChat))

	primary.Enqueue(pathChat, slow)
	requireAnswer(t, chatAsk(t, sb, chatModel, "stream", true), "stream")
	assert.Equal(t, 1, fallback.Count(pathChat), "a stream that does not start within the first-byte timeout falls back")
}
