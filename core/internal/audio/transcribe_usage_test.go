package audio

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/provider"
)

// What a transcription's answer says of its usage, in each format: the
// duration (JSON usage, verbose_json), the end of the speech (the last
// subtitle cue), or the tokens of a token-billed model; plain text says
// nothing.
func TestReportUsage(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		want                    Transcription
	}{
		{"duration usage", "application/json", `{"text":"hi","usage":{"type":"duration","seconds":3}}`, Transcription{Seconds: 3}},
		{"verbose_json", "application/json", `{"text":"hi","duration":2.5}`, Transcription{Seconds: 2.5}},
		{"token usage", "application/json; charset=utf-8", `{"text":"hi","usage":{"type":"tokens","input_tokens":120,"output_tokens":5,"total_tokens":125}}`,
			Transcription{InputTokens: 120, OutputTokens: 5, TotalTokens: 125}},
		{"tokens without a total", "application/json", `{"text":"hi","usage":{"input_tokens":7,"output_tokens":2}}`,
			Transcription{InputTokens: 7, OutputTokens: 2, TotalTokens: 9}},
		// As a chat answer's usage is billed: a bad upstream cannot make
		// the bill negative.
		{"negative tokens", "application/json", `{"text":"hi","usage":{"type":"tokens","input_tokens":-120,"output_tokens":5,"total_tokens":-115}}`,
			Transcription{OutputTokens: 5, TotalTokens: 5}},
		{"a negative duration", "application/json", `{"text":"hi","duration":-2.5}`, Transcription{}},
		{"srt", "text/plain", "1\n00:00:00,000 --> 00:00:01,500\nhello\n\n2\n00:00:01,500 --> 00:01:02,250\nthere\n", Transcription{Seconds: 62.25, spokenOnly: true}},
		{"vtt", "text/vtt", "WEBVTT\n\n00:00.000 --> 00:03.120\nhello\n", Transcription{Seconds: 3.12, spokenOnly: true}},
		{"text", "text/plain", "hello there", Transcription{spokenOnly: true}},
		{"broken cue", "text/plain", "00:00:00,000 --> later\n", Transcription{spokenOnly: true}},
	} {
		got := Transcription{ContentType: tc.contentType}
		reportUsage(&got, []byte(tc.body))
		tc.want.ContentType = tc.contentType
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// pcmWAV is a WAV file of seconds of 16 kHz mono 16-bit silence.
func pcmWAV(seconds float64) []byte {
	return riff(riffChunk("fmt ", wavFmt(1, 1, 16000, 16)), riffChunk("data", make([]byte, 2*int(seconds*16000))))
}

// answering is an upstream that answers every request with body.
func answering(t *testing.T, contentType, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Every transcription is metered by the audio's duration, whatever the
// upstream answers: the duration it reports stands; an answer that tells
// none, or only when the speech ends, is metered by the duration the
// file's header tells (or the end of the speech, when a header claims
// less).
func TestAudioTranscriptionMeteredByTheAudio(t *testing.T) {
	wav4 := pcmWAV(4)
	silence := newFakeScribe(t, "", 0)
	speech := newFakeScribe(t, "Hello world. Bye.", 2.5)
	untimed := answering(t, "application/json", `{"language_code":"eng","language_probability":0.98,"text":"Hello world.","words":[
		{"text":"Hello","start":null,"end":null,"type":"word","speaker_id":"speaker_0","logprob":-0.1},
		{"text":" ","start":null,"end":null,"type":"spacing","speaker_id":"speaker_0","logprob":0},
		{"text":"world.","start":null,"end":null,"type":"word","speaker_id":"speaker_0","logprob":-0.1}]}`)
	groq := answering(t, "application/json", `{"text":"Hello world.","x_groq":{"id":"req_01jabc"}}`)
	srt := answering(t, "text/plain; charset=utf-8", "1\n00:00:00,000 --> 00:00:02,500\nHello world.\n\n")
	verbose := answering(t, "application/json", `{"task":"transcribe","language":"english","duration":3.98,"text":"Hello world.","segments":[]}`)
	tokens := answering(t, "application/json", `{"text":"Hello world.","usage":{"type":"tokens","input_tokens":60,"input_token_details":{"text_tokens":0,"audio_tokens":60},"output_tokens":4,"total_tokens":64}}`)
	for _, tc := range []struct {
		name    string
		spec    provider.Spec
		url     string
		model   string
		format  string
		audio   []byte
		seconds float64
		tokens  int64
	}{
		{"ElevenLabs, silence: no words", elevenLabsSpec, silence.URL, "scribe_v1", "json", wav4, 4, 0},
		{"ElevenLabs, silence after the last word", elevenLabsSpec, speech.URL, "scribe_v1", "text", wav4, 4, 0},
		{"ElevenLabs, subtitles", elevenLabsSpec, speech.URL, "scribe_v1", "srt", wav4, 4, 0},
		{"ElevenLabs, words without times", elevenLabsSpec, untimed, "scribe_v1", "json", wav4, 4, 0},
		{"ElevenLabs, a header that claims less than the words", elevenLabsSpec, speech.URL, "scribe_v1", "json", pcmWAV(1), 2.5, 0},
		{"Whisper json without usage", openAISpec, groq, "whisper-large-v3", "json", wav4, 4, 0},
		{"Whisper text asked as json", openAISpec, groq, "distil-large-v3", "text", wav4, 4, 0},
		{"Whisper subtitles", openAISpec, srt, "whisper-1", "srt", wav4, 4, 0},
		{"the duration the upstream reports stands", openAISpec, verbose, "whisper-1", "verbose_json", wav4, 3.98, 0},
		{"a token-billed model", openAISpec, tokens, "gpt-4o-transcribe", "json", wav4, 4, 64},
		{"WebM, by its Segment's duration", openAISpec, groq, "whisper-large-v3", "json", webmFile("webm", false, ebml(ebmlDuration, 0, float64Bytes(4250))), 4.25, 0},
		{"WebM of a recorder that writes no duration", openAISpec, groq, "whisper-large-v3", "json", webmFile("webm", true), 0, 0},
		{"a file whose duration is not known", openAISpec, groq, "whisper-large-v3", "json", []byte("\x1aE\xdf\xa3 webm"), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := transcribeWith(t, tc.spec, tc.url, tc.model, tc.format, tc.audio)
			require.NoError(t, err)
			assert.InDelta(t, tc.seconds, out.Seconds, 1e-9)
			assert.Equal(t, tc.tokens, out.TotalTokens)
		})
	}
}
