package audio

import (
	"context"
	"errors"
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
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// streamWith runs one streamed transcription attempt against an upstream
// that answers body as server-sent events, and returns what reached the
// sink.
func streamWith(t *testing.T, body string) (Transcription, []string, error) {
	t.Helper()
	return streamParts(t, body)
}

// streamParts is streamWith of an upstream that sends its body in parts,
// each once the one before reached the sink.
func streamParts(t *testing.T, parts ...string) (Transcription, []string, error) {
	t.Helper()
	relayed := make(chan struct{}, len(parts))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		for i, p := range parts {
			if i > 0 {
				select {
				case <-relayed:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = w.Write([]byte(p))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	spool := NewSpool(t.TempDir(), 1<<20, 0)
	t.Cleanup(func() { _ = spool.Close() })
	_, err := spool.Write([]byte("RIFF...."))
	require.NoError(t, err)
	s := New(nil, Options{})
	w := s.watch(context.Background())
	defer w.close()
	c := &dispatch.Conn{Connection: &busv1.Connection{}, Spec: openAISpec, BaseURL: srv.URL, Credential: "sk-stream-key", Client: http.DefaultClient}
	tg := routing.Target{Spec: openAISpec, Model: "gpt-4o-transcribe"}
	req := TranscribeRequest{Model: tg.Model, Filename: "a.wav", Stream: true}
	var out Transcription
	var got []string
	err = transcribe(context.Background(), w, tg, c, req, spool, &out, func(ch Chunk) error {
		assert.Equal(t, "text/event-stream; charset=utf-8", ch.ContentType)
		got = append(got, string(ch.Data))
		relayed <- struct{}{}
		return nil
	})
	return out, got, err
}

// The events reach the sink framed as they came, and the done event's
// usage is the transcription's.
func TestTranscriptionStreamRelaysTheEvents(t *testing.T) {
	out, got, err := streamWith(t, "data: {\"type\":\"transcript.text.delta\",\"delta\":\"hi\"}\n\n"+
		"event: x\r\ndata: {\"type\":\"transcript.text.done\",\"text\":\"hi\",\n"+
		"data: \"usage\":{\"type\":\"tokens\",\"input_tokens\":7,\"output_tokens\":2,\"total_tokens\":9}}\n\n")
	require.NoError(t, err)
	assert.Equal(t, "data: {\"type\":\"transcript.text.delta\",\"delta\":\"hi\"}\n\n"+
		"event: x\ndata: {\"type\":\"transcript.text.done\",\"text\":\"hi\",\ndata: \"usage\":{\"type\":\"tokens\",\"input_tokens\":7,\"output_tokens\":2,\"total_tokens\":9}}\n\n",
		strings.Join(got, ""))
	assert.Equal(t, []int64{7, 2, 9}, []int64{out.InputTokens, out.OutputTokens, out.TotalTokens})
}

// A stream that ends before its done event failed: before any event it is
// the attempt's failure (the next connection's turn), after one it is
// committed and says the stream broke off.
func TestTranscriptionStreamWithoutItsEnd(t *testing.T) {
	_, got, err := streamWith(t, "")
	require.Error(t, err)
	assert.Empty(t, got)
	assert.False(t, credential.IsCommitted(err))
	var up *credential.UpstreamError
	require.ErrorAs(t, err, &up)
	assert.Equal(t, http.StatusBadGateway, up.Status)

	_, got, err = streamWith(t, "data: {\"type\":\"transcript.text.delta\",\"delta\":\"hi\"}\n\n")
	require.Error(t, err)
	assert.Len(t, got, 1)
	assert.True(t, credential.IsCommitted(err))
	var broken *credential.StreamError
	require.True(t, errors.As(err, &broken), "%v", err)
	assert.Equal(t, "stream_interrupted", broken.Code)
}

// An error the upstream reports as its stream's first event, before any of
// the transcript, is the attempt's failure with the status the error stands
// for, as an error answer is: the next connection's turn, or the client's
// answer when none is left; nothing of it reaches the client.
func TestTranscriptionStreamErrorFirst(t *testing.T) {
	for name, tc := range map[string]struct {
		body   string
		status int
		code   string
	}{
		"an error event": {"event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n",
			http.StatusTooManyRequests, "rate_limit_exceeded"},
		"an error member": {"data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"code\":\"server_error\"}}\n\n",
			http.StatusInternalServerError, "server_error"},
		"a Responses-style error": {"data: {\"type\":\"error\",\"code\":\"invalid_value\",\"message\":\"Audio file might be corrupted\",\"param\":\"file\"}\n\n",
			http.StatusBadRequest, "invalid_value"},
		"an error event it cannot read": {"event: error\ndata: oops\n\n", http.StatusBadGateway, "bad_upstream_response"},
	} {
		t.Run(name, func(t *testing.T) {
			_, got, err := streamWith(t, tc.body+"data: {\"type\":\"transcript.text.done\",\"text\":\"\"}\n\n")
			require.Error(t, err)
			assert.Empty(t, got, "nothing reached the client")
			assert.False(t, credential.IsCommitted(err), "the next connection may answer")
			var up *credential.UpstreamError
			require.ErrorAs(t, err, &up)
			assert.Equal(t, tc.status, up.Status)
			assert.Contains(t, string(up.Body), `"`+tc.code+`"`)
		})
	}
}

// An error the upstream reports after part of the transcript reached the
// client ends the stream with that error, once: the client gets the
// upstream's own error in place of the gateway's stream_interrupted, and
// the failure is judged by the status the error stands for, as a chat
// stream's is (a rate limit, not a network failure).
func TestTranscriptionStreamErrorAfterTheFirstEvent(t *testing.T) {
	_, got, err := streamParts(t, "data: {\"type\":\"transcript.text.delta\",\"delta\":\"hi\"}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"Rate limit reached for sk-stream-key\",\"type\":\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\n\n")
	require.Error(t, err)
	assert.Equal(t, []string{"data: {\"type\":\"transcript.text.delta\",\"delta\":\"hi\"}\n\n"}, got, "the error goes once, as the stream's end")
	assert.True(t, credential.IsCommitted(err))
	var broken *credential.StreamError
	require.ErrorAs(t, err, &broken)
	assert.Equal(t, "upstream_error", broken.Code)
	assert.Contains(t, string(broken.Body), `"rate_limit_exceeded"`, "the upstream's own error")
	assert.NotContains(t, string(broken.Body), "sk-stream-key", "scrubbed of the credential")
	f := credential.Classify(err, time.Now())
	assert.Equal(t, http.StatusTooManyRequests, f.Status)
	assert.Equal(t, credential.ReasonRateLimited, f.Reason)
}
