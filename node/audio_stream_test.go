package node_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// streamingSTTModel is a transcription model that streams its transcript
// (OpenAI's gpt-4o-transcribe family).
const streamingSTTModel = "openai/gpt-4o-mini-transcribe"

// streamTranscript reads a streamed transcription with the official
// client: its deltas in order, its done event, and the stream's error.
func streamTranscript(t *testing.T, c *openai.Client, audio []byte, model string, opts ...option.RequestOption) (deltas []string, done *openai.TranscriptionTextDoneEvent, err error) {
	t.Helper()
	st := c.Audio.Transcriptions.NewStreaming(context.Background(), openai.AudioTranscriptionNewParams{
		File: openai.File(bytes.NewReader(audio), "clip.wav", "audio/wav"), Model: model,
	}, opts...)
	defer st.Close()
	for st.Next() {
		switch ev := st.Current().AsAny().(type) {
		case openai.TranscriptionTextDeltaEvent:
			deltas = append(deltas, ev.Delta)
		case openai.TranscriptionTextDoneEvent:
			done = &ev
		}
	}
	return deltas, done, st.Err()
}

// A streamed transcription reaches the official client as the upstream's
// events, in order, as they come: a connection that fails before the first
// event is passed over for the next. The usage event is recorded once,
// with the done event's tokens and the file's duration.
func TestAudioTranscriptionStreamWithOfficialGoClient(t *testing.T) {
	g := newAudioGateway(t, 2)
	g.ups[0].Enqueue(upstreamtest.PathTranscriptions, upstreamtest.RateLimited(""))
	audio := wav(1.5)

	var resp *http.Response
	deltas, done, err := streamTranscript(t, g.client(), audio, streamingSTTModel, option.WithResponseInto(&resp))
	require.NoError(t, err)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, upstreamtest.TranscriptDeltas(audio), deltas, "every delta, in order")
	require.NotNil(t, done, "the done event")
	assert.Equal(t, upstreamtest.Transcript(audio), done.Text)
	in, out := upstreamtest.TranscriptionTokens(audio)
	assert.EqualValues(t, in, done.Usage.InputTokens)
	assert.EqualValues(t, out, done.Usage.OutputTokens)

	got := lastRequest(t, g.ups[1], pathTranscriptions)
	assert.Equal(t, audio, got.File, "the fallback got the file intact")
	f := fieldsOf(t, got)
	assert.Equal(t, []string{"true"}, f["stream"])
	assert.Equal(t, []string{"gpt-4o-mini-transcribe"}, f["model"])

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	evs = usageEvents(t, g.sb)
	require.Len(t, evs, 1, "recorded once")
	ev := evs[0]
	assert.Equal(t, "audio.transcriptions", ev.GetEndpoint())
	assert.Equal(t, "gpt-4o-mini-transcribe", ev.GetModel())
	assert.Equal(t, g.ids[1], ev.GetConnectionId())
	assert.EqualValues(t, 200, ev.GetStatus())
	assert.Equal(t, []int64{int64(in), int64(out), int64(in + out)}, []int64{ev.GetPromptTokens(), ev.GetCompletionTokens(), ev.GetTotalTokens()})
	assert.Equal(t, 1.5, ev.GetAudioSeconds(), "the file's duration")
	assert.False(t, ev.GetPartial())
}

// Whisper models do not stream: a transcription asked for as a stream is
// answered whole, as OpenAI answers whisper-1 (which ignores stream), and
// the upstream is not asked for one.
func TestAudioTranscriptionStreamFromWhisper(t *testing.T) {
	g := newAudioGateway(t, 1)
	audio := wav(0.5)
	r := g.upload(t, audio, "model", sttModel, "stream", "true")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, upstreamtest.Transcript(audio), r.JSON["text"])
	assert.NotContains(t, fieldsOf(t, lastRequest(t, g.ups[0], pathTranscriptions)), "stream")
}

// A stream cut, or stalled, after its first event is not asked of the next
// connection: it ends with an error event the official client raises, after
// the deltas that came. The usage event says the answer is partial.
func TestAudioTranscriptionStreamCut(t *testing.T) {
	for name, fault := range map[string]upstreamtest.Fault{"cut": upstreamtest.CutAfter(2), "stall": upstreamtest.StallAfter(2)} {
		t.Run(name, func(t *testing.T) {
			g := newAudioGateway(t, 2)
			g.ups[0].SetDefault(upstreamtest.PathTranscriptions, fault)
			audio := wav(0.5)
			deltas, done, err := streamTranscript(t, g.client(), audio, streamingSTTModel)
			require.Error(t, err, "the client sees the end")
			assert.Contains(t, err.Error(), "error")
			assert.Equal(t, upstreamtest.TranscriptDeltas(audio)[:2], deltas, "the deltas before the cut")
			assert.Nil(t, done)
			assert.Zero(t, g.ups[1].Count(upstreamtest.PathTranscriptions), "no fallback after the first event")

			var evs []*busv1.UsageEvent
			require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 10*time.Second, 20*time.Millisecond)
			assert.Equal(t, "audio.transcriptions", evs[0].GetEndpoint())
			assert.NotEqualValues(t, 200, evs[0].GetStatus())
			assert.True(t, evs[0].GetPartial())
		})
	}
}

// The official npm client streams a transcription through the gateway,
// and raises the error event of one cut short.
func TestAudioTranscriptionStreamNPM(t *testing.T) {
	nodetest.NPM(t)
	g := newAudioGateway(t, 1)
	g.ups[0].Enqueue(upstreamtest.PathTranscriptions, upstreamtest.Fault{}, upstreamtest.CutAfter(1))
	audio := wav(1)
	path := filepath.Join(t.TempDir(), "clip.wav")
	require.NoError(t, os.WriteFile(path, audio, 0o600))

	rs := g.sb.NPMClient(g.key).Ops(t, "audio.mjs",
		map[string]any{"op": "transcribeStream", "file": path, "params": map[string]any{"model": streamingSTTModel}},
		map[string]any{"op": "transcribeStream", "file": path, "params": map[string]any{"model": streamingSTTModel}},
	)
	type event struct {
		Type  string `json:"type"`
		Delta string `json:"delta"`
		Text  string `json:"text"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	var whole struct {
		Events []event             `json:"events"`
		Error  *nodetest.NodeError `json:"error"`
	}
	require.Nil(t, rs[0].Error)
	rs[0].Decode(t, &whole)
	require.Nil(t, whole.Error)
	require.NotEmpty(t, whole.Events)
	var text strings.Builder
	for _, e := range whole.Events[:len(whole.Events)-1] {
		assert.Equal(t, "transcript.text.delta", e.Type)
		text.WriteString(e.Delta)
	}
	assert.Equal(t, upstreamtest.Transcript(audio), text.String())
	last := whole.Events[len(whole.Events)-1]
	assert.Equal(t, "transcript.text.done", last.Type)
	assert.Equal(t, upstreamtest.Transcript(audio), last.Text)
	in, out := upstreamtest.TranscriptionTokens(audio)
	assert.Equal(t, []int{in, out}, []int{last.Usage.InputTokens, last.Usage.OutputTokens})

	var cut struct {
		Events []event             `json:"events"`
		Error  *nodetest.NodeError `json:"error"`
	}
	require.Nil(t, rs[1].Error)
	rs[1].Decode(t, &cut)
	require.NotNil(t, cut.Error, "the cut is raised")
	assert.Equal(t, "APIError", cut.Error.Class)
	require.Len(t, cut.Events, 1)
	assert.Equal(t, upstreamtest.TranscriptDeltas(audio)[0], cut.Events[0].Delta)
}

// A client that leaves a streamed transcription ends the upstream call at
// once, not when the upstream's silence outlasts the stall timeout; the
// usage event says the answer is partial.
func TestAudioTranscriptionStreamClientLeaves(t *testing.T) {
	g := newAudioGateway(t, 1)
	g.ups[0].SetDefault(upstreamtest.PathTranscriptions, upstreamtest.StallAfter(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := g.client().Audio.Transcriptions.NewStreaming(ctx, openai.AudioTranscriptionNewParams{
		File: openai.File(bytes.NewReader(wav(0.5)), "clip.wav", "audio/wav"), Model: streamingSTTModel,
	})
	require.True(t, st.Next(), "%v", st.Err())
	left := time.Now()
	cancel()
	_ = st.Close()

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Less(t, time.Since(left), time.Second, "the upstream call ended with the client's leaving (the stall timeout is 2s)")
	assert.True(t, evs[0].GetPartial())
}

// An upstream that answers a streamed transcription with an error event
// before any of the transcript failed as an error answer does: the next
// connection answers, and the client, with no connection left, gets that
// error with its status, not a 200 stream holding it. Neither is metered
// for the failed attempt.
func TestAudioTranscriptionStreamErrorFirst(t *testing.T) {
	errorFirst := upstreamtest.Status(http.StatusOK,
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\n\n",
		"Content-Type", "text/event-stream")

	t.Run("fallback", func(t *testing.T) {
		g := newAudioGateway(t, 2)
		g.ups[0].Enqueue(upstreamtest.PathTranscriptions, errorFirst)
		audio := wav(1)
		deltas, done, err := streamTranscript(t, g.client(), audio, streamingSTTModel)
		require.NoError(t, err)
		assert.Equal(t, upstreamtest.TranscriptDeltas(audio), deltas)
		require.NotNil(t, done)
		assert.Equal(t, 1, g.ups[1].Count(upstreamtest.PathTranscriptions), "the next connection answered")

		var evs []*busv1.UsageEvent
		require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
		assert.Equal(t, g.ids[1], evs[0].GetConnectionId())
		assert.EqualValues(t, 200, evs[0].GetStatus())
		assert.False(t, evs[0].GetPartial())
	})

	t.Run("no connection left", func(t *testing.T) {
		g := newAudioGateway(t, 1)
		g.ups[0].Enqueue(upstreamtest.PathTranscriptions, errorFirst)
		r := g.upload(t, wav(1), "model", streamingSTTModel, "stream", "true")
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
		assert.Equal(t, "rate_limit_exceeded", errorCode(r))

		var evs []*busv1.UsageEvent
		require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
		ev := evs[0]
		assert.EqualValues(t, http.StatusTooManyRequests, ev.GetStatus())
		assert.Zero(t, ev.GetAudioSeconds(), "not metered")
		assert.Zero(t, ev.GetTotalTokens())
		assert.False(t, ev.GetPartial())
	})
}

// An upstream that reports an error after part of a streamed transcription
// reached the client ends the stream with that error, once: the client
// gets the upstream's own error event (its rate_limit_exceeded), not that
// event followed by the gateway's stream_interrupted, and the connection
// cools down as for the rate limit it reported, not as for a broken
// connection.
func TestAudioTranscriptionStreamErrorAfterTheFirstEvent(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	relayed := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"type\":\"transcript.text.delta\",\"delta\":\"Hello\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-relayed:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\n\n")
	}))
	t.Cleanup(up.Close)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL + "/v1", "enabledModels": []string{"gpt-4o-mini-transcribe"}}})

	ct, body := multipartForm(t, wav(0.5), "model", streamingSTTModel, "stream", "true")
	req, err := http.NewRequest(http.MethodPost, sb.BaseURL+pathTranscriptions, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", ct)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	var events []string
	var ev strings.Builder
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, ":") {
			continue // keep-alive
		}
		if line != "\n" {
			ev.WriteString(line)
			continue
		}
		if len(events) == 0 {
			close(relayed) // the first event reached the client
		}
		events = append(events, ev.String())
		ev.Reset()
	}
	require.NotEmpty(t, events)
	assert.Contains(t, events[0], "transcript.text.delta")
	var failures []string
	for _, e := range events[1:] {
		if strings.Contains(e, `"error"`) {
			failures = append(failures, e)
		}
	}
	require.Len(t, failures, 1, "one error event ends the stream: %q", events)
	assert.Contains(t, failures[0], `"rate_limit_exceeded"`, "the upstream's own")

	cds := sb.Admin(t, http.MethodGet, "/api/cooldowns", nil).JSON["cooldowns"].([]any)
	require.Len(t, cds, 1)
	assert.EqualValues(t, http.StatusTooManyRequests, cds[0].(map[string]any)["status"], "%v", cds[0])
}
