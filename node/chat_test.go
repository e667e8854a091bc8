package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

const (
	chatModel = "openai/gpt-4o-mini"
	pathChat  = "/v1/chat/completions"
)

func sdk(t *testing.T, sb *nodetest.Instance) openai.Client {
	t.Helper()
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "sdk"})
	require.Equal(t, http.StatusCreated, key.Status)
	return openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key.JSON["key"].(string)), option.WithMaxRetries(0))
}

func userMessage(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    chatModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

var weatherTool = openai.ChatCompletionToolUnionParam{OfFunction: &openai.ChatCompletionFunctionToolParam{
	Function: openai.FunctionDefinitionParam{
		Name: "get_weather",
		Parameters: openai.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required":   []string{"city"},
		},
	},
}}

func TestChatWithOfficialGoClient(t *testing.T) {
	p := newPair(t)
	client := sdk(t, p.sb)
	ctx := context.Background()

	t.Run("whole answer", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, userMessage("hello there"))
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		assert.Equal(t, "echo: hello there", resp.Choices[0].Message.Content)
		assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
		assert.Positive(t, resp.Usage.TotalTokens)
		var sent map[string]any
		require.NoError(t, json.Unmarshal(p.primary.Requests()[0].Body, &sent))
		assert.Equal(t, "gpt-4o-mini", sent["model"], "the upstream gets its own model id")
	})

	t.Run("stream", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, userMessage("stream this please"))
		acc := openai.ChatCompletionAccumulator{}
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		require.NoError(t, stream.Err())
		assert.Greater(t, chunks, 2, "relayed event by event")
		require.Len(t, acc.Choices, 1)
		assert.Equal(t, "echo: stream this please", acc.Choices[0].Message.Content)
		assert.Zero(t, acc.Usage.TotalTokens, "no usage chunk the client did not ask for")
		last := p.primary.Requests()[len(p.primary.Requests())-1]
		assert.Contains(t, string(last.Body), `"include_usage":true`, "the gateway asks for usage for its own accounting")
	})

	t.Run("stream with usage", func(t *testing.T) {
		params := userMessage("count me")
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		require.NoError(t, stream.Err())
		assert.Positive(t, acc.Usage.TotalTokens)
	})

	t.Run("tool calls, whole and streamed", func(t *testing.T) {
		params := userMessage("weather in Paris?")
		params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
		resp, err := client.Chat.Completions.New(ctx, params)
		require.NoError(t, err)
		require.Len(t, resp.Choices[0].Message.ToolCalls, 1)
		call := resp.Choices[0].Message.ToolCalls[0]
		assert.Equal(t, "get_weather", call.Function.Name)
		assert.JSONEq(t, `{"city":"weather in Paris?"}`, call.Function.Arguments)

		stream := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		require.NoError(t, stream.Err())
		require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
		assert.Equal(t, "get_weather", acc.Choices[0].Message.ToolCalls[0].Function.Name)
		assert.JSONEq(t, `{"city":"weather in Paris?"}`, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
		assert.Equal(t, "tool_calls", string(acc.Choices[0].FinishReason))
	})
}

// Usage that arrives on the finish chunk, with choices, is still counted.
func TestChatUsageOnTheFinishChunk(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithUsageInFinishChunk())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	client := sdk(t, sb)
	stream := client.Chat.Completions.NewStreaming(context.Background(), userMessage("hi"))
	for stream.Next() {
	}
	require.NoError(t, stream.Err())
	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Positive(t, evs[0].GetCompletionTokens())
	assert.Equal(t, evs[0].GetPromptTokens()+evs[0].GetCompletionTokens(), evs[0].GetTotalTokens(), "reasoning is not counted twice")
	assert.Equal(t, "chat.completions", evs[0].GetEndpoint())
}

// streamChat sends a streaming request and returns the raw SSE events.
func streamChat(t *testing.T, sb *nodetest.Instance, text string) (int, []string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":%q}]}`, chatModel, text)
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+pathChat, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	return resp.StatusCode, events
}

// The failure scenarios of reference/failover.md for streams.
func TestChatStreamFailures(t *testing.T) {
	sdkErr := func(t *testing.T, sb *nodetest.Instance) error {
		client := sdk(t, sb)
		stream := client.Chat.Completions.NewStreaming(context.Background(), userMessage("a long answer please"))
		for stream.Next() {
		}
		return stream.Err()
	}
	for _, tc := range []struct {
		name  string
		fault upstreamtest.Fault
		code  string
	}{
		{"8 stream cut after some tokens", upstreamtest.CutAfter(3), "stream_interrupted"},
		{"9 stream stalls after some tokens", upstreamtest.StallAfter(3), "stream_stalled"},
		{"10 malformed chunk mid-stream", upstreamtest.MalformedChunkAfter(3), "stream_malformed"},
		{"11 stream ends without [DONE] or finish", upstreamtest.NoFinish(), "stream_interrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t)
			p.primary.Enqueue(pathChat, tc.fault)
			status, events := streamChat(t, p.sb, "a long answer please")
			require.Equal(t, http.StatusOK, status)
			require.NotEmpty(t, events)
			last := events[len(events)-1]
			assert.NotEqual(t, "[DONE]", last, "never a clean end")
			assert.Contains(t, last, `"error"`)
			assert.Contains(t, last, tc.code)
			for _, e := range events[:len(events)-1] {
				assert.True(t, json.Valid([]byte(e)), "no garbage forwarded: %s", e)
			}
			assert.Zero(t, p.fallback.Count(pathChat), "no fallback once the stream started")

			// The broken primary is cooling now; a fresh pair for the SDK.
			p = newPair(t)
			p.primary.Enqueue(pathChat, tc.fault)
			err := sdkErr(t, p.sb)
			require.Error(t, err, "the official SDK raises it")
			assert.Contains(t, err.Error(), tc.code)
		})
	}
	t.Run("11 stream ends without [DONE] after its finish reason: a clean end", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathChat, upstreamtest.NoDone())
		status, events := streamChat(t, p.sb, "x")
		require.Equal(t, http.StatusOK, status)
		assert.Equal(t, "[DONE]", events[len(events)-1])
	})
	t.Run("7 slow first token below the timeout: the slow answer", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathChat, upstreamtest.SlowFirstByte(300*time.Millisecond))
		require.NoError(t, sdkErr(t, p.sb))
		assert.Zero(t, p.fallback.Count(pathChat))
	})
}

// Before the first byte reaches the client, every failure falls back.
func TestChatFailoverBeforeFirstByte(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault upstreamtest.Fault
	}{
		{"1 429 with Retry-After", upstreamtest.RateLimited("2")},
		{"3 500", upstreamtest.OpenAIError(500, "server_error", "", "boom")},
		{"4 503", upstreamtest.Overloaded()},
		{"5 reset before any byte", upstreamtest.ResetBeforeBytes()},
		{"6 never answers", upstreamtest.Hang()},
		{"cut before the first event", upstreamtest.CutAfter(0)},
		{"stalls before the first event", upstreamtest.StallAfter(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t)
			p.primary.Enqueue(pathChat, tc.fault)
			status, events := streamChat(t, p.sb, "fall back")
			require.Equal(t, http.StatusOK, status)
			assert.Equal(t, "[DONE]", events[len(events)-1])
			assert.Equal(t, 1, p.fallback.Count(pathChat), "the fallback answered")

			p.primary.Enqueue(pathChat, tc.fault)
			// A whole answer falls back the same way (after a 429 the cooling
			// primary is skipped and the fallback answers at once).
			client := sdk(t, p.sb)
			resp, err := client.Chat.Completions.New(context.Background(), userMessage("whole"))
			require.NoError(t, err)
			assert.Equal(t, "echo: whole", resp.Choices[0].Message.Content)
		})
	}
	t.Run("12 context length exceeded: passed through, no fallback", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathChat, upstreamtest.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "too many tokens"))
		client := sdk(t, p.sb)
		_, err := client.Chat.Completions.New(context.Background(), userMessage("x"))
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		assert.Equal(t, "context_length_exceeded", apiErr.Code)
		assert.Zero(t, p.fallback.Count(pathChat))
	})
	t.Run("14 every connection rate limited: 429", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.SetDefault(pathChat, upstreamtest.RateLimited("3"))
		p.fallback.SetDefault(pathChat, upstreamtest.RateLimited("3"))
		status, _ := streamChat(t, p.sb, "x")
		assert.Equal(t, http.StatusTooManyRequests, status)
	})
}

// Row 20: a client that leaves mid-stream cancels the upstream request.
func TestChatClientDisconnectCancelsUpstream(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	gone := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 2 {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"},\"finish_reason\":null}]}\n\n", i)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer up.Close()
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1"}})

	leaveAfterFirstChunk(t, sb)
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled after the client left")
	}
}

func TestChatErrors(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	for _, tc := range []struct {
		name, body, code string
		status           int
	}{
		{"not JSON", `{"model":`, "invalid_json", 400},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "missing_required_parameter", 400},
		{"no messages", `{"model":"openai/gpt-4o-mini"}`, "missing_required_parameter", 400},
		{"empty messages", `{"model":"openai/gpt-4o-mini","messages":[]}`, "empty_array", 400},
		{"unknown model", `{"model":"acme/x","messages":[{"role":"user","content":"x"}]}`, "model_not_found", 400},
		{"stream not a boolean", `{"model":"openai/gpt-4o-mini","stream":"yes","messages":[{"role":"user","content":"x"}]}`, "invalid_type", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sb.Do(t, http.MethodPost, pathChat, tc.body)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			assert.Equal(t, tc.code, errorCode(r))
		})
	}
	assert.Zero(t, up.Count(pathChat))
}
