package node_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// A codex connection's backend speaks only Responses: Chat Completions and
// Messages requests routed to it reach {base}/responses in that shape, with
// the headers the provider table gives it, and come back in the client's
// dialect, whole and streamed, with tool calls.
func TestCodexConnectionSpeaksResponses(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithAPIKey("chatgpt-token"))
	created := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "codex", "name": "cx", "apiKey": "chatgpt-token",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	client := sdk(t, sb)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello codex")}}

	resp, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "echo: hello codex", resp.Choices[0].Message.Content)
	assert.Positive(t, resp.Usage.TotalTokens)
	req := up.Requests()[0]
	assert.Equal(t, pathResponses, req.Path)
	assert.Equal(t, "Bearer chatgpt-token", req.Header.Get("Authorization"))
	assert.Equal(t, "responses=experimental", req.Header.Get("OpenAI-Beta"))
	assert.Equal(t, "codex_cli_rs", req.Header.Get("Originator"))
	var sent map[string]any
	require.NoError(t, json.Unmarshal(req.Body, &sent))
	assert.Equal(t, "gpt-5-codex", sent["model"])
	assert.Equal(t, "be brief", sent["instructions"])
	assert.Equal(t, false, sent["store"])

	params.Tools = []openai.ChatCompletionToolUnionParam{weatherTool}
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Paris")}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "get_weather", acc.Choices[0].Message.ToolCalls[0].Function.Name)
	assert.JSONEq(t, `{"city":"Paris"}`, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "tool_calls", string(acc.Choices[0].FinishReason))

	key := gatewayKey(t, sb)
	r, _, events := postMessages(t, sb, key, messagesBody("codex/gpt-5-codex", "hello claude code", true))
	require.Equal(t, http.StatusOK, r.StatusCode)
	assert.Equal(t, "echo: hello claude code", accumulate(t, events).text)

	// A break after the first event: the client's own in-band error.
	up.Enqueue(pathResponses, upstreamtest.CutAfter(4))
	stream = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a long answer please")}})
	n := 0
	for stream.Next() {
		n++
	}
	require.Error(t, stream.Err(), "never a clean end")
	assert.Contains(t, stream.Err().Error(), "stream_interrupted")
	assert.Positive(t, n, "the break came after the first event")
}

// loginCodex runs a codex authorization-code login against the fake auth
// server, through the admin routes.
func loginCodex(t *testing.T, sb *nodetest.Instance) {
	t.Helper()
	start := sb.Admin(t, http.MethodPost, "/api/oauth/codex/authorize", map[string]any{"redirectUri": "http://127.0.0.1:9/cb"})
	require.Equal(t, http.StatusOK, start.Status, "%s", start.Body)
	authURL := start.JSON["authorizeUrl"].(string)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	r := sb.Admin(t, http.MethodPost, "/api/oauth/codex/exchange", map[string]any{"flowId": start.JSON["flowId"], "code": fakeAuthCode})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
}

// The ChatGPT backend of a codex login: every request carries the account
// id the login's id_token named (chatgpt-account-id), and since the backend
// answers only streamed requests, non-streamed chat, Messages and Responses
// requests go up streamed and come back whole in the client's dialect.
func TestCodexLoginAccountHeaderAndStreamOnlyBackend(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeAccess), upstreamtest.WithChatGPTBackend())
	f := newFakeAuthServer(t, pollOK)
	sb := serveWithOAuth(t, f, up.URL())
	loginCodex(t, sb)
	key := gatewayKey(t, sb)
	ctx := context.Background()

	checkUpstream := func(t *testing.T, n int) {
		t.Helper()
		reqs := up.Requests()
		require.Len(t, reqs, n)
		req := reqs[n-1]
		assert.Equal(t, pathResponses, req.Path)
		assert.Equal(t, fakeAccountID, req.Header.Get("chatgpt-account-id"))
		assert.Equal(t, "Bearer "+fakeAccess, req.Header.Get("Authorization"))
		var sent map[string]any
		require.NoError(t, json.Unmarshal(req.Body, &sent))
		assert.Equal(t, true, sent["stream"], "the backend only streams")
		assert.Equal(t, false, sent["store"], "the backend stores nothing")
		for _, refused := range []string{"max_output_tokens", "temperature", "top_p"} {
			assert.NotContains(t, sent, refused, "the backend refuses it")
		}
	}

	t.Run("chat", func(t *testing.T) {
		client := sdk(t, sb)
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello whole chat")}})
		require.NoError(t, err)
		assert.Equal(t, "chat.completion", string(resp.Object))
		assert.Equal(t, "echo: hello whole chat", resp.Choices[0].Message.Content)
		assert.Positive(t, resp.Usage.TotalTokens)
		checkUpstream(t, 1)
	})
	t.Run("messages", func(t *testing.T) {
		// As Claude Code asks: max_tokens (max_output_tokens upstream) and
		// a temperature, which the backend refuses.
		body := messagesBody("codex/gpt-5-codex", "hello whole messages", false)
		body["temperature"] = 1
		r, raw, events := postMessages(t, sb, key, body)
		require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
		require.Nil(t, events, "a whole answer, not a stream")
		var msg struct {
			Type    string `json:"type"`
			Content []struct {
				Type, Text string
			} `json:"content"`
			StopReason string `json:"stop_reason"`
			Usage      struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(raw, &msg), "%s", raw)
		assert.Equal(t, "message", msg.Type)
		require.NotEmpty(t, msg.Content)
		assert.Equal(t, "echo: hello whole messages", msg.Content[0].Text)
		assert.Equal(t, "end_turn", msg.StopReason)
		assert.Positive(t, msg.Usage.OutputTokens)
		checkUpstream(t, 2)
	})
	t.Run("responses", func(t *testing.T) {
		client := sdk(t, sb)
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "codex/gpt-5-codex",
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("hello whole responses")},
			MaxOutputTokens: openai.Int(512), Temperature: openai.Float(0.2), TopP: openai.Float(0.9), Store: openai.Bool(true)})
		require.NoError(t, err)
		assert.Equal(t, "completed", string(resp.Status))
		assert.Equal(t, "echo: hello whole responses", resp.OutputText())
		assert.Positive(t, resp.Usage.TotalTokens)
		checkUpstream(t, 3)
	})
	// The backend's refusals are {"detail": "..."}: the client reads the
	// detail, in its route's error shape.
	t.Run("refusal", func(t *testing.T) {
		const detail = "Unsupported parameter: reasoning.summary"
		up.Enqueue(pathResponses, upstreamtest.Status(http.StatusBadRequest, `{"detail":"`+detail+`"}`))
		r, raw, _ := postMessages(t, sb, key, messagesBody("codex/gpt-5-codex", "refused", false))
		require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", raw)
		var anthropicErr struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		require.NoError(t, json.Unmarshal(raw, &anthropicErr), "%s", raw)
		assert.Equal(t, "error", anthropicErr.Type)
		assert.Equal(t, "invalid_request_error", anthropicErr.Error.Type)
		assert.Equal(t, detail, anthropicErr.Error.Message)

		up.Enqueue(pathResponses, upstreamtest.Status(http.StatusBadRequest, `{"detail":"`+detail+`"}`))
		client := sdk(t, sb)
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("refused")}})
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		assert.Equal(t, detail, apiErr.Message)
	})
	// The backend streams even a whole answer: an error in that stream is
	// the client's answer, with its code and the status it stands for.
	t.Run("error in an assembled stream", func(t *testing.T) {
		failed := `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","output":[],` +
			`"error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model."}}}`
		up.Enqueue(pathResponses, upstreamtest.Status(http.StatusOK, "event: response.failed\ndata: "+failed+"\n\n", "Content-Type", "text/event-stream"))
		client := sdk(t, sb)
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("far too long")}})
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		assert.Equal(t, "context_length_exceeded", apiErr.Code)
		assert.Equal(t, "Your input exceeds the context window of this model.", apiErr.Message)
	})
}

// A non-streamed request assembled from a stream-only backend keeps the
// stream's watchdog: a backend that goes silent mid-stream gives way to the
// next connection before anything reached the client.
func TestCodexStreamOnlyStallFallsOver(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	primary := upstreamtest.New(t, upstreamtest.WithAPIKey("tok-1"), upstreamtest.WithChatGPTBackend())
	fallback := upstreamtest.New(t, upstreamtest.WithAPIKey("tok-2"), upstreamtest.WithChatGPTBackend())
	for i, up := range []*upstreamtest.Server{primary, fallback} {
		r := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "codex", "name": "cx" + string(rune('a'+i)),
			"apiKey": []string{"tok-1", "tok-2"}[i], "priority": i + 1, "providerSpecificData": map[string]any{"baseUrl": up.URL()}})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	}
	primary.Enqueue(pathResponses, upstreamtest.StallAfter(2))
	client := sdk(t, sb)
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("still there?")}})
	require.NoError(t, err)
	assert.Equal(t, "echo: still there?", resp.Choices[0].Message.Content)
	assert.Equal(t, 1, primary.Count(pathResponses))
	assert.Equal(t, 1, fallback.Count(pathResponses), "the fallback answered")
}

// Tokens brought in through the admin API, not a login here, keep what a
// login would have kept from them: a codex connection created with an
// access token, or an API key, that names a ChatGPT account sends that
// account with every request (chatgpt-account-id), as one made by a login
// does; a new key naming another account replaces it.
func TestCodexImportedTokensNameTheirAccount(t *testing.T) {
	const otherAccount = "acct-55aa01"
	// {"https://api.openai.com/auth": {"chatgpt_account_id": otherAccount}}, unsigned.
	otherToken := "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(`{"https://api.openai.com/auth":{"chatgpt_account_id":"`+otherAccount+`"}}`)) + ".sig"
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"oauth tokens", map[string]any{"oauth": map[string]any{"accessToken": fakeIDToken, "refreshToken": fakeRefresh}}},
		{"api key", map[string]any{"apiKey": fakeIDToken}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := upstreamtest.New(t, upstreamtest.WithAPIKey(fakeIDToken, otherToken), upstreamtest.WithChatGPTBackend())
			sb := nodetest.Serve(t, t.TempDir())
			body := map[string]any{"provider": "codex", "name": "imported", "providerSpecificData": map[string]any{"baseUrl": up.URL()}}
			maps.Copy(body, tc.body)
			created := sb.Admin(t, http.MethodPost, "/api/providers", body)
			require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
			id := created.JSON["connection"].(map[string]any)["id"].(string)

			client := sdk(t, sb)
			ask := func() {
				t.Helper()
				resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello imported")}})
				require.NoError(t, err)
				assert.Equal(t, "echo: hello imported", resp.Choices[0].Message.Content)
			}
			ask()
			reqs := up.Requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, fakeAccountID, reqs[0].Header.Get("chatgpt-account-id"))
			assert.Equal(t, "Bearer "+fakeIDToken, reqs[0].Header.Get("Authorization"))

			// A new key of another account: its account, not the old one.
			updated := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"apiKey": otherToken})
			require.Equal(t, http.StatusOK, updated.Status, "%s", updated.Body)
			ask()
			reqs = up.Requests()
			require.Len(t, reqs, 2)
			assert.Equal(t, otherAccount, reqs[1].Header.Get("chatgpt-account-id"))
			assert.Equal(t, "Bearer "+otherToken, reqs[1].Header.Get("Authorization"))
		})
	}
}

// A codex connection's backend has no stop sequences: the gateway stops
// the answer at the request's own (Claude Code's classifier sends
// stop_sequences ["</block>"]), a sequence split across the backend's
// deltas included. The text ends right before it, the answer ends as a
// stop on a sequence does (chat's "stop"; Messages' stop_sequence, naming
// it), the backend is hung up on, and the request is recorded as answered,
// billed the gateway's estimate of what it delivered and of its prompt,
// which the client's answer tells too.
func TestCodexStopSequences(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	hungUp := make(chan struct{}, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range []string{
			`{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`,
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","role":"assistant","content":[]}}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"yes </bl"}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"ock> and then"}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":" more"}`,
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", eventType(e), e)
			w.(http.Flusher).Flush()
		}
		// A model that goes on writing: only a hang-up ends it.
		<-r.Context().Done()
		hungUp <- struct{}{}
	}))
	t.Cleanup(up.Close)
	created := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "codex", "name": "cx", "apiKey": "chatgpt-token",
		"providerSpecificData": map[string]any{"baseUrl": up.URL}})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	wait := func() {
		t.Helper()
		select {
		case <-hungUp:
		case <-time.After(10 * time.Second):
			t.Fatal("the backend was not hung up on")
		}
	}

	client := sdk(t, sb)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "codex/gpt-5-codex",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		Stop:          openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"</block>"}},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "yes ", acc.Choices[0].Message.Content)
	assert.Equal(t, "stop", string(acc.Choices[0].FinishReason))
	wait()

	key := gatewayKey(t, sb)
	body := messagesBody("codex/gpt-5-codex", "classify this", false)
	body["stop_sequences"] = []string{"</block>"}
	r, raw, _ := postMessages(t, sb, key, body)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", raw)
	var msg struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StopReason   string `json:"stop_reason"`
		StopSequence string `json:"stop_sequence"`
		Usage        struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(raw, &msg), "%s", raw)
	require.Len(t, msg.Content, 1, "%s", raw)
	assert.Equal(t, "yes ", msg.Content[0].Text)
	assert.Equal(t, "stop_sequence", msg.StopReason)
	assert.Equal(t, "</block>", msg.StopSequence)
	wait()

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, sb); return len(evs) >= 2 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, evs, 2)
	for _, ev := range evs {
		assert.EqualValues(t, http.StatusOK, ev.GetStatus())
		assert.Empty(t, ev.GetErrorCode())
		assert.EqualValues(t, 1, ev.GetCompletionTokens(), "4 characters delivered, about 1 token")
		assert.True(t, ev.GetTokensEstimated())
		assert.False(t, ev.GetPartial(), "a whole answer")
		assert.Positive(t, ev.GetPromptTokens(), "the request's text")
		// The client is told what it is billed.
		switch ev.GetEndpoint() {
		case "chat.completions":
			assert.Equal(t, ev.GetPromptTokens(), acc.Usage.PromptTokens)
			assert.Equal(t, ev.GetCompletionTokens(), acc.Usage.CompletionTokens)
			assert.Equal(t, ev.GetTotalTokens(), acc.Usage.TotalTokens)
		case "messages":
			assert.Equal(t, ev.GetPromptTokens(), msg.Usage.InputTokens)
			assert.Equal(t, ev.GetCompletionTokens(), msg.Usage.OutputTokens)
		default:
			assert.Fail(t, "an answer of another route", ev.GetEndpoint())
		}
	}
}

// eventType is the type member of an event's data.
func eventType(data string) string {
	var e struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(data), &e)
	return e.Type
}
