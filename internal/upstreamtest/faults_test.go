package upstreamtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

const (
	chatBody       = `{"model":"m","messages":[{"role":"user","content":"Hello there"}]}`
	chatStreamBody = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello there"}]}`
	messagesBody   = `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hello there"}]}`
	messagesStream = `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hello there"}]}`
)

// startStream posts a streaming request and returns the response, whose
// status must be 200.
func startStream(t *testing.T, ctx context.Context, s *upstreamtest.Server, path, body string, header ...string) *http.Response {
	t.Helper()
	resp, err := do(t, ctx, newClient(t), s, http.MethodPost, path, []byte(body), header...)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

func TestStatus(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathChatCompletions,
		upstreamtest.Status(http.StatusBadGateway, "upstream connect error", "Retry-After", "2", "X-Extra", "a"),
		upstreamtest.Status(http.StatusInternalServerError, `{"error":{"message":"boom"}}`),
		upstreamtest.Status(http.StatusOK, "<html>", "Content-Type", "text/html"),
	)
	resp, body := post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Equal(t, "upstream connect error", string(body))
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	require.Equal(t, "a", resp.Header.Get("X-Extra"))

	resp, body = post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.JSONEq(t, `{"error":{"message":"boom"}}`, string(body))

	resp, body = post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html", resp.Header.Get("Content-Type"))
	require.Equal(t, "<html>", string(body))

	require.Panics(t, func() { upstreamtest.Status(500, "", "Retry-After") })
}

func TestProviderErrors(t *testing.T) {
	s := upstreamtest.New(t)
	for _, tc := range []struct {
		name                 string
		fault                upstreamtest.Fault
		openAIStatus         int
		openAIType, code     string
		anthropicStatus      int
		anthropicType        string
		retryAfter           string
		openAIMessagePrefix  string
		anthropicMessagePart string
	}{
		{"rate limited", upstreamtest.RateLimited("2"), 429, "requests", "rate_limit_exceeded", 429, "rate_limit_error", "2", "Rate limit reached", "rate limit"},
		{"rate limited without retry-after", upstreamtest.RateLimited(""), 429, "requests", "rate_limit_exceeded", 429, "rate_limit_error", "", "Rate limit reached", "rate limit"},
		{"unauthorized", upstreamtest.Unauthorized(), 401, "invalid_request_error", "invalid_api_key", 401, "authentication_error", "", "Incorrect API key provided", "expired"},
		{"overloaded", upstreamtest.Overloaded(), 503, "server_error", "", 529, "overloaded_error", "", "The server is overloaded", "Overloaded"},
		{"openai error", upstreamtest.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "too long"), 400, "invalid_request_error", "context_length_exceeded", 400, "", "", "too long", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Enqueue(upstreamtest.PathChatCompletions, tc.fault)
			resp, body := post(t, s, upstreamtest.PathChatCompletions, chatBody)
			require.Equal(t, tc.openAIStatus, resp.StatusCode)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Equal(t, tc.retryAfter, resp.Header.Get("Retry-After"))
			requireSameShape(t, decode(t, fixture(t, "openai/embeddings-bad-request.json")), decode(t, body))
			var e openAIError
			require.NoError(t, json.Unmarshal(body, &e))
			require.Equal(t, tc.openAIType, e.Error.Type)
			require.Equal(t, tc.code, ptr(e.Error.Code))
			require.True(t, strings.HasPrefix(e.Error.Message, tc.openAIMessagePrefix), e.Error.Message)

			if tc.anthropicType == "" {
				return
			}
			s.Enqueue(upstreamtest.PathMessages, tc.fault)
			resp, body = post(t, s, upstreamtest.PathMessages, messagesBody, anthropicHeaders...)
			require.Equal(t, tc.anthropicStatus, resp.StatusCode)
			require.Equal(t, tc.retryAfter, resp.Header.Get("Retry-After"))
			ae := requireAnthropicError(t, body)
			require.Equal(t, tc.anthropicType, ae.Error.Type)
			require.Contains(t, ae.Error.Message, tc.anthropicMessagePart)
		})
	}

	s.Enqueue(upstreamtest.PathMessages, upstreamtest.AnthropicError(529, "overloaded_error", "Overloaded"))
	resp, body := post(t, s, upstreamtest.PathMessages, messagesBody, anthropicHeaders...)
	require.Equal(t, 529, resp.StatusCode)
	require.JSONEq(t, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, string(body))
}

func TestFaultsApplyToEveryRoute(t *testing.T) {
	s := upstreamtest.New(t)
	for _, path := range []string{upstreamtest.PathModels, "/v1/unknown", upstreamtest.PathEmbeddings} {
		s.Enqueue(path, upstreamtest.Overloaded())
		resp, err := do(t, t.Context(), newClient(t), s, http.MethodGet, path, nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
	}
}

func TestResetBeforeBytes(t *testing.T) {
	s := upstreamtest.New(t)
	for _, path := range []string{upstreamtest.PathChatCompletions, upstreamtest.PathMessages} {
		s.Enqueue(path, upstreamtest.ResetBeforeBytes())
		_, err := do(t, t.Context(), newClient(t), s, http.MethodPost, path, []byte(chatBody), anthropicHeaders...)
		require.Error(t, err)
		require.True(t, errors.Is(err, syscall.ECONNRESET), "want a connection reset, got %v", err)
	}
	// The next request is answered normally.
	resp, _ := post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 2, s.Count(upstreamtest.PathChatCompletions))
}

func TestHangUntilClientGivesUp(t *testing.T) {
	hook, received := requestSignal()
	s := upstreamtest.New(t, hook)
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Hang())

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		resp, err := do(t, ctx, newClient(t), s, http.MethodPost, upstreamtest.PathChatCompletions, []byte(chatBody))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-received // the fake holds the request
	select {
	case err := <-errc:
		t.Fatalf("the request was answered: %v", err)
	default:
	}
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	// A client timeout works the same way.
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Hang())
	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := do(t, ctx, newClient(t), s, http.MethodPost, upstreamtest.PathChatCompletions, []byte(chatBody))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestHangReleasedByClose(t *testing.T) {
	hook, received := requestSignal()
	s := upstreamtest.NewServer(hook)
	s.SetDefault(upstreamtest.PathChatCompletions, upstreamtest.Hang())
	s.Enqueue(upstreamtest.PathMessages, upstreamtest.StallAfter(1))

	errc := make(chan error, 2)
	go func() {
		_, err := do(t, context.Background(), newClient(t), s, http.MethodPost, upstreamtest.PathChatCompletions, []byte(chatBody))
		errc <- err
	}()
	go func() {
		resp, err := do(t, context.Background(), newClient(t), s, http.MethodPost, upstreamtest.PathMessages, []byte(messagesStream), anthropicHeaders...)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-received
	<-received
	s.Close() // must not wait for the client: the handlers are released
	require.Error(t, <-errc)
	require.Error(t, <-errc)
	s.Close() // idempotent
}

func TestSlowFirstByte(t *testing.T) {
	s := upstreamtest.New(t)
	const delay = 50 * time.Millisecond
	s.Enqueue(upstreamtest.PathChatCompletions,
		upstreamtest.SlowFirstByte(delay),
		upstreamtest.RateLimited("1").Delayed(delay),
	)
	start := time.Now()
	resp, body := post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.GreaterOrEqual(t, time.Since(start), delay)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "echo: Hello there")

	start = time.Now()
	resp, _ = post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.GreaterOrEqual(t, time.Since(start), delay)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	// A client that gives up first sees its own timeout.
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.SlowFirstByte(time.Hour))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := do(t, ctx, newClient(t), s, http.MethodPost, upstreamtest.PathChatCompletions, []byte(chatBody))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCutAfter(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.CutAfter(2))
	resp := startStream(t, t.Context(), s, upstreamtest.PathChatCompletions, chatStreamBody)
	evs, err := readSSE(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Len(t, evs, 2)
	for _, ev := range evs {
		require.NotEqual(t, "[DONE]", ev.Data)
		decode(t, []byte(ev.Data))
	}

	s.Enqueue(upstreamtest.PathMessages, upstreamtest.CutAfter(4))
	resp = startStream(t, t.Context(), s, upstreamtest.PathMessages, messagesStream, anthropicHeaders...)
	evs, err = readSSE(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, []string{"message_start", "content_block_start", "ping", "content_block_delta"}, eventNames(evs))

	// More chunks than the stream has: everything is sent, then the
	// connection is dropped instead of ending the body.
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.CutAfter(1000))
	resp = startStream(t, t.Context(), s, upstreamtest.PathChatCompletions, chatStreamBody)
	evs, err = readSSE(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, "[DONE]", evs[len(evs)-1].Data)
}

func TestCutAfterZeroTruncatesAnyBody(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathEmbeddings, upstreamtest.CutAfter(0))
	resp, err := do(t, t.Context(), newClient(t), s, http.MethodPost, upstreamtest.PathEmbeddings, []byte(`{"model":"e","input":"x"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Positive(t, resp.ContentLength)
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)

	s.Enqueue(upstreamtest.PathSpeech, upstreamtest.CutAfter(1))
	resp, err = do(t, t.Context(), newClient(t), s, http.MethodPost, upstreamtest.PathSpeech,
		[]byte(`{"model":"tts-1","voice":"alloy","input":"Hello there, how are you?"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Len(t, b, 2048)
}

func TestStallAfter(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		header           []string
	}{
		{"openai", upstreamtest.PathChatCompletions, chatStreamBody, nil},
		{"anthropic", upstreamtest.PathMessages, messagesStream, anthropicHeaders},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := upstreamtest.New(t)
			s.Enqueue(tc.path, upstreamtest.StallAfter(3))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp := startStream(t, ctx, s, tc.path, tc.body, tc.header...)
			sr := newSSEReader(resp.Body)
			for range 3 {
				_, err := sr.next()
				require.NoError(t, err)
			}
			// Nothing more comes until the client gives up.
			stop := time.AfterFunc(100*time.Millisecond, cancel)
			defer stop.Stop()
			ev, err := sr.next()
			require.ErrorIs(t, err, context.Canceled, "got %+v", ev)
		})
	}
}

func TestMalformedChunkAfter(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.MalformedChunkAfter(1))
	resp := startStream(t, t.Context(), s, upstreamtest.PathChatCompletions, chatStreamBody)
	evs, err := readSSE(resp.Body)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "{not json", evs[1].Data)
	require.Equal(t, "[DONE]", evs[len(evs)-1].Data)
	for i, ev := range evs[:len(evs)-1] {
		if i != 1 {
			decode(t, []byte(ev.Data))
		}
	}

	s.Enqueue(upstreamtest.PathMessages, upstreamtest.MalformedChunkAfter(3))
	resp = startStream(t, t.Context(), s, upstreamtest.PathMessages, messagesStream, anthropicHeaders...)
	evs, err = readSSE(resp.Body)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, sseEvent{Event: "content_block_delta", Data: "{not json"}, evs[3])
	require.Equal(t, "message_stop", evs[len(evs)-1].Event)
}

func TestNoDone(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.NoDone())
	resp := startStream(t, t.Context(), s, upstreamtest.PathChatCompletions, chatStreamBody)
	evs, err := readSSE(resp.Body)
	require.ErrorIs(t, err, io.EOF, "the body ends cleanly")
	require.NotEqual(t, "[DONE]", evs[len(evs)-1].Data)
	require.Contains(t, evs[len(evs)-2].Data, `"finish_reason":"stop"`)
	require.Contains(t, evs[len(evs)-1].Data, `"choices":[],"usage":{`)

	s.Enqueue(upstreamtest.PathMessages, upstreamtest.NoDone())
	resp = startStream(t, t.Context(), s, upstreamtest.PathMessages, messagesStream, anthropicHeaders...)
	evs, err = readSSE(resp.Body)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "message_delta", evs[len(evs)-1].Event)
}

func TestNoFinish(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.NoFinish())
	resp := startStream(t, t.Context(), s, upstreamtest.PathChatCompletions, chatStreamBody)
	evs, err := readSSE(resp.Body)
	require.ErrorIs(t, err, io.EOF, "the body ends cleanly")
	chunks := make([]chunk, len(evs))
	for i, ev := range evs {
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &chunks[i]))
		require.Nil(t, chunks[i].Choices[0].FinishReason)
		require.Nil(t, chunks[i].Usage)
	}
	require.Equal(t, " there", *chunks[len(chunks)-1].Choices[0].Delta.Content)

	s.Enqueue(upstreamtest.PathMessages, upstreamtest.NoFinish())
	resp = startStream(t, t.Context(), s, upstreamtest.PathMessages, messagesStream, anthropicHeaders...)
	evs, err = readSSE(resp.Body)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "content_block_delta", evs[len(evs)-1].Event)
}

func TestStreamFaultsOnNonStreamingRequests(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.NoDone(), upstreamtest.MalformedChunkAfter(0), upstreamtest.NoFinish())
	for range 3 {
		resp, body := post(t, s, upstreamtest.PathChatCompletions, chatBody)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, string(body), "echo: Hello there")
	}
}

func TestEnqueueThenDefault(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.RateLimited("1"), upstreamtest.Overloaded())
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.OK(), upstreamtest.Unauthorized())
	var got []int
	for range 6 {
		resp, _ := post(t, s, upstreamtest.PathChatCompletions, chatBody)
		got = append(got, resp.StatusCode)
	}
	require.Equal(t, []int{429, 503, 200, 401, 200, 200}, got)

	// Other routes are not affected.
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.Overloaded())
	resp, _ := post(t, s, upstreamtest.PathEmbeddings, `{"model":"e","input":"x"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func TestSetDefault(t *testing.T) {
	s := upstreamtest.New(t)
	s.SetDefault(upstreamtest.PathChatCompletions, upstreamtest.Overloaded())
	s.Enqueue(upstreamtest.PathChatCompletions, upstreamtest.OK())
	var got []int
	for range 4 {
		resp, _ := post(t, s, upstreamtest.PathChatCompletions, chatBody)
		got = append(got, resp.StatusCode)
	}
	require.Equal(t, []int{200, 503, 503, 503}, got, "queued faults come before the default")

	s.SetDefault(upstreamtest.PathChatCompletions, upstreamtest.OK())
	resp, _ := post(t, s, upstreamtest.PathChatCompletions, chatBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 5, s.Count(upstreamtest.PathChatCompletions))
}
