package node_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// elevenLabsWords are the word timestamps ElevenLabs answers for a
// transcript: each word for 0.4 s, one every half second, with the spacing
// between two words as an entry of its own.
func elevenLabsWords(text string) []map[string]any {
	var out []map[string]any
	for i, w := range strings.Fields(text) {
		start := float64(i) * 0.5
		if i > 0 {
			out = append(out, map[string]any{"text": " ", "start": start - 0.1, "end": start, "type": "spacing", "speaker_id": "speaker_0", "logprob": 0.0})
		}
		out = append(out, map[string]any{"text": w, "start": start, "end": start + 0.4, "type": "word", "speaker_id": "speaker_0", "logprob": -0.1})
	}
	return out
}

// Plain text from whisper-1 is metered by its duration like every other
// format: the gateway asks the upstream for verbose_json and answers the
// client what the text format answers, byte for byte. A token-billed model,
// which has no verbose_json, is asked for json, and is metered by the tokens
// it tells.
func TestAudioTranscriptionPlainTextIsMetered(t *testing.T) {
	g := newAudioGateway(t, 1)
	audio := wav(0.5)

	r := g.upload(t, audio, "model", sttModel, "response_format", "text")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	want, ctype := g.direct(t, audio, "model", "whisper-1", "response_format", "text")
	assert.Equal(t, want, string(r.Body), "the text format's answer")
	assert.Equal(t, upstreamtest.Transcript(audio)+"\n", string(r.Body))
	assert.Equal(t, ctype, r.Header.Get("Content-Type"))
	assert.Equal(t, "text/plain; charset=utf-8", r.Header.Get("Content-Type"))
	assert.Equal(t, []string{"verbose_json"}, fieldsOf(t, g.ups[0].Requests()[0])["response_format"])

	r = g.upload(t, audio, "model", "openai/gpt-4o-transcribe", "response_format", "text")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, upstreamtest.Transcript(audio)+"\n", string(r.Body))
	assert.Equal(t, "text/plain; charset=utf-8", r.Header.Get("Content-Type"))
	assert.Equal(t, []string{"json"}, fieldsOf(t, lastRequest(t, g.ups[0], pathTranscriptions))["response_format"], "json, which tells the tokens")

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 2 }, 5*time.Second, 20*time.Millisecond)
	byModel := map[string]*busv1.UsageEvent{}
	for _, ev := range evs {
		byModel[ev.GetModel()] = ev
	}
	require.Contains(t, byModel, "whisper-1")
	assert.Equal(t, 4.0, byModel["whisper-1"].GetAudioSeconds(), "the duration verbose_json told")
	require.Contains(t, byModel, "gpt-4o-transcribe")
	in, out := upstreamtest.TranscriptionTokens(audio)
	tok := byModel["gpt-4o-transcribe"]
	assert.Equal(t, []int64{int64(in), int64(out), int64(in + out)}, []int64{tok.GetPromptTokens(), tok.GetCompletionTokens(), tok.GetTotalTokens()}, "the tokens json told")
}

// ElevenLabs' answer to srt and vtt is subtitles cut from its word
// timestamps, one cue per sentence, as OpenAI's are; the duration is the
// end of the last word.
func TestAudioTranscriptionElevenLabsSubtitles(t *testing.T) {
	g := newAudioGateway(t, 0)
	el := newFakeElevenLabs(t)
	g.sb.CreateConnection(t, map[string]any{"provider": "elevenlabs", "name": "el", "apiKey": elevenKey,
		"providerSpecificData": map[string]any{"baseUrl": el.srv.URL + "/v1"}})
	audio := wav(0.3)
	text := upstreamtest.Transcript(audio) // "Transcribed N bytes of audio. Checksum XXXXXXXX."
	i := strings.Index(text, ". ")
	require.Positive(t, i)
	first, second := text[:i+1], text[i+2:]

	for _, tc := range []struct{ format, want string }{
		{"srt", "1\n00:00:00,000 --> 00:00:02,400\n" + first + "\n\n2\n00:00:02,500 --> 00:00:03,400\n" + second + "\n\n"},
		{"vtt", "WEBVTT\n\n00:00:00.000 --> 00:00:02.400\n" + first + "\n\n00:00:02.500 --> 00:00:03.400\n" + second + "\n\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			r := g.upload(t, audio, "model", "elevenlabs/scribe_v1", "response_format", tc.format)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			assert.Equal(t, tc.want, string(r.Body))
			assert.Equal(t, "text/plain; charset=utf-8", r.Header.Get("Content-Type"))
		})
	}
	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 2 }, 5*time.Second, 20*time.Millisecond)
	for _, ev := range evs {
		assert.Equal(t, 3.4, ev.GetAudioSeconds(), "the end of the last word")
	}
}

// A provider's voices are listed only when the machine has a connection
// that can speak them: OpenAI's fixed list too, which a machine with only an
// ElevenLabs connection could not use.
func TestAudioVoicesNeedAConnection(t *testing.T) {
	g := newAudioGateway(t, 0)
	voices := func(query string) int {
		t.Helper()
		r := g.sb.Do(t, http.MethodGet, "/v1/audio/voices"+query, nil, "Authorization", "Bearer "+g.key)
		if r.Status != http.StatusOK {
			assert.Equal(t, "no_credentials", errorCode(r), "%s", r.Body)
			assert.Equal(t, "provider", r.JSON["error"].(map[string]any)["param"])
		}
		return r.Status
	}
	assert.Equal(t, http.StatusBadRequest, voices("?provider=openai"), "no connection at all")

	el := newFakeElevenLabs(t)
	g.sb.CreateConnection(t, map[string]any{"provider": "elevenlabs", "name": "el", "apiKey": elevenKey,
		"providerSpecificData": map[string]any{"baseUrl": el.srv.URL + "/v1"}})
	assert.Equal(t, http.StatusOK, voices("?provider=elevenlabs"))
	assert.Equal(t, http.StatusBadRequest, voices("?provider=openai"), "an ElevenLabs connection does not speak OpenAI's voices")

	up := upstreamtest.New(t)
	g.sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	assert.Equal(t, http.StatusOK, voices("?provider=openai"))
	assert.Zero(t, len(up.Requests()), "listing OpenAI's voices calls no upstream")
}

// A transcription whose answer tells no duration, or only when the speech
// ends, is metered by the duration the uploaded file's header tells: a
// Whisper server answering json without usage (as Groq's does), and
// ElevenLabs with silence after the last word.
func TestAudioTranscriptionMeteredByTheFile(t *testing.T) {
	g := newAudioGateway(t, 0)
	groq := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"text":"Hello there.","x_groq":{"id":"req_01jabcdef"}}`)
	}))
	t.Cleanup(groq.Close)
	g.sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "whisper-server", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": groq.URL}})
	el := newFakeElevenLabs(t)
	g.sb.CreateConnection(t, map[string]any{"provider": "elevenlabs", "name": "el", "apiKey": elevenKey,
		"providerSpecificData": map[string]any{"baseUrl": el.srv.URL + "/v1"}})

	r := g.upload(t, wav(2.5), "model", "openai/whisper-large-v3")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "Hello there.", r.JSON["text"])
	r = g.upload(t, wav(5), "model", "elevenlabs/scribe_v1", "response_format", "srt")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 2 }, 5*time.Second, 20*time.Millisecond)
	byModel := map[string]float64{}
	for _, ev := range evs {
		byModel[ev.GetModel()] = ev.GetAudioSeconds()
	}
	assert.Equal(t, map[string]float64{"whisper-large-v3": 2.5, "scribe_v1": 5}, byModel)
}
