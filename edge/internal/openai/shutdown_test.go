package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// waitingRouter answers an embeddings call only when its context ends, as
// core's call does when the edge's shutdown cancels it.
type waitingRouter struct {
	corev1.RouterClient
	called chan struct{}
}

func (r waitingRouter) CreateEmbeddings(ctx context.Context, _ *corev1.CreateEmbeddingsRequest, _ ...grpc.CallOption) (*corev1.CreateEmbeddingsResponse, error) {
	close(r.called)
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// waitingSpeech is a speech answer whose first part never comes before
// its context ends.
type waitingSpeech struct {
	grpc.ServerStreamingClient[corev1.SpeechResponse]
	ctx context.Context
}

func (s waitingSpeech) Recv() (*corev1.SpeechResponse, error) {
	<-s.ctx.Done()
	return nil, status.FromContextError(s.ctx.Err()).Err()
}

func (r waitingRouter) Speech(ctx context.Context, _ *corev1.SpeechRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[corev1.SpeechResponse], error) {
	close(r.called)
	return waitingSpeech{ctx: ctx}, nil
}

// An embeddings or speech request still awaiting its answer when the edge's shutdown
// ends it is answered 503 shutting_down, to be sent again elsewhere, as a
// chat request is, not 499 canceled, which no client retries.
func TestWholeAnswersEndedByShutdownAnswer503(t *testing.T) {
	for _, tc := range []struct {
		path, body string
		handler    func(corev1.RouterClient) http.Handler
	}{
		{"/v1/embeddings", `{"model":"openai/text-embedding-3-small","input":"hi"}`,
			func(r corev1.RouterClient) http.Handler { return &Embeddings{Router: r} }},
		{"/v1/audio/speech", `{"model":"openai/tts-1","input":"hi","voice":"alloy"}`,
			func(r corev1.RouterClient) http.Handler { return &Speech{Router: r} }},
	} {
		router := waitingRouter{called: make(chan struct{})}
		ctx, end := context.WithCancelCause(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		go func() {
			<-router.called
			end(ErrShuttingDown)
		}()
		rec := httptest.NewRecorder()
		tc.handler(router).ServeHTTP(rec, req)
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, tc.path+": "+rec.Body.String())
		assert.Equal(t, "shutting_down", body.Error.Code, tc.path)
	}
}

// waitingUpload is a transcription stream whose core takes no audio until
// its context ends, as a call the edge's shutdown cancels mid-upload.
type waitingUpload struct {
	grpc.BidiStreamingClient[corev1.StreamTranscriptionRequest, corev1.StreamTranscriptionResponse]
	ctx    context.Context
	called chan struct{}
}

func (s waitingUpload) Send(*corev1.StreamTranscriptionRequest) error {
	close(s.called)
	<-s.ctx.Done()
	return status.FromContextError(s.ctx.Err()).Err()
}

func (s waitingUpload) Recv() (*corev1.StreamTranscriptionResponse, error) {
	<-s.ctx.Done()
	return nil, status.FromContextError(s.ctx.Err()).Err()
}

type uploadRouter struct {
	corev1.RouterClient
	called chan struct{}
}

func (r uploadRouter) StreamTranscription(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[corev1.StreamTranscriptionRequest, corev1.StreamTranscriptionResponse], error) {
	return waitingUpload{ctx: ctx, called: r.called}, nil
}

// A transcription whose upload the edge's shutdown ends is answered 503
// shutting_down too, not the cancelled call's 499.
func TestTranscriptionUploadEndedByShutdownAnswers503(t *testing.T) {
	router := uploadRouter{called: make(chan struct{})}
	ct, body := form(t, [2]string{"model", "openai/whisper-1"}, [2]string{"file", strings.Repeat("a", 64<<10)})
	ctx, end := context.WithCancelCause(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/audio/transcriptions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", ct)
	go func() {
		<-router.called
		end(ErrShuttingDown)
	}()
	rec := httptest.NewRecorder()
	(&Transcriptions{Router: router}).ServeHTTP(rec, req)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "shutting_down")
}
