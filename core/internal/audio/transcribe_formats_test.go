package audio

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// transcribeWith runs one transcription attempt against an upstream at base.
func transcribeWith(t *testing.T, spec provider.Spec, base, model, format string, audio []byte, granularities ...string) (Transcription, error) {
	t.Helper()
	spool := NewSpool(t.TempDir(), 1<<20, 0)
	t.Cleanup(func() { _ = spool.Close() })
	_, err := spool.Write(audio)
	require.NoError(t, err)
	s := New(nil, Options{})
	w := s.watch(context.Background())
	defer w.close()
	c := &dispatch.Conn{Connection: &busv1.Connection{}, Spec: spec, BaseURL: base, Credential: "k", Client: http.DefaultClient}
	tg := routing.Target{Spec: spec, Model: model}
	req := TranscribeRequest{Model: model, Filename: "a.wav", ContentType: "audio/wav", ResponseFormat: format, TimestampGranularities: granularities}
	var out Transcription
	err = transcribe(context.Background(), w, tg, c, req, spool, &out, nil)
	return out, err
}

var openAISpec = provider.Spec{ID: "openai", Auth: provider.AuthBearer, Format: provider.FormatOpenAI}

// Plain text from a Whisper model: the upstream is asked for verbose_json,
// which tells the duration, and the client gets what the text format gives,
// byte for byte. A token-billed model, which has no verbose_json, is asked
// for json, which tells its tokens.
func TestAudioPlainTextIsMetered(t *testing.T) {
	audio := []byte("RIFF audio of some length")
	up := upstreamtest.New(t)
	direct := func(model string) (string, string) {
		t.Helper()
		body, ct := multipartFormOf(t, audio, "model", model, "response_format", "text")
		resp, err := http.Post(up.URL()+"/audio/transcriptions", ct, body)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b), resp.Header.Get("Content-Type")
	}
	for _, tc := range []struct {
		model, sent string
		seconds     float64
		tokens      bool
	}{
		{"whisper-1", "verbose_json", 4, false},
		{"whisper-large-v3-turbo", "verbose_json", 4, false},
		{"gpt-4o-transcribe", "json", 0, true},
		{"gpt-4o-mini-transcribe", "json", 0, true},
	} {
		t.Run(tc.model, func(t *testing.T) {
			out, err := transcribeWith(t, openAISpec, up.URL(), tc.model, "text", audio)
			require.NoError(t, err)
			wantBody, wantType := direct(tc.model)
			assert.Equal(t, upstreamtest.Transcript(audio)+"\n", wantBody)
			assert.Equal(t, wantBody, string(out.Body), "what the text format answers")
			assert.Equal(t, wantType, out.ContentType)
			assert.Equal(t, tc.seconds, out.Seconds)
			in, outTokens := upstreamtest.TranscriptionTokens(audio)
			if !tc.tokens {
				in, outTokens = 0, 0
			}
			assert.Equal(t, [3]int64{int64(in), int64(outTokens), int64(in + outTokens)}, [3]int64{out.InputTokens, out.OutputTokens, out.TotalTokens}, "the tokens the upstream reported")
			reqs := up.Requests()
			assert.Equal(t, tc.sent, formValue(t, reqs[len(reqs)-2], "response_format"), "what the upstream was asked")
		})
	}

	t.Run("other formats as asked", func(t *testing.T) {
		for _, format := range []string{"", "json", "verbose_json", "srt", "vtt"} {
			_, err := transcribeWith(t, openAISpec, up.URL(), "whisper-1", format, audio)
			require.NoError(t, err)
			reqs := up.Requests()
			assert.Equal(t, format, formValue(t, reqs[len(reqs)-1], "response_format"))
		}
	})

	answer := func(contentType, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", contentType)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	t.Run("usage.seconds preferred to the duration", func(t *testing.T) {
		out, err := transcribeWith(t, openAISpec, answer("application/json", `{"text":"hi","duration":2.9,"usage":{"type":"duration","seconds":3}}`), "whisper-1", "text", audio)
		require.NoError(t, err)
		assert.Equal(t, "hi\n", string(out.Body))
		assert.Equal(t, 3.0, out.Seconds)
	})
	t.Run("an upstream that answers text anyway", func(t *testing.T) {
		out, err := transcribeWith(t, openAISpec, answer("text/plain", "hi\n"), "whisper-1", "text", audio)
		require.NoError(t, err)
		assert.Equal(t, "hi\n", string(out.Body))
		assert.Equal(t, "text/plain", out.ContentType)
	})
	t.Run("JSON without a text", func(t *testing.T) {
		_, err := transcribeWith(t, openAISpec, answer("application/json", `{"duration":1}`), "whisper-1", "text", audio)
		var up *credential.UpstreamError
		require.ErrorAs(t, err, &up)
		assert.Equal(t, http.StatusBadGateway, up.Status)
	})
}

// ElevenLabs answers words with their times: srt and vtt are cut from them,
// like OpenAI's, and the duration is the end of the last word.
func TestAudioElevenLabsSubtitles(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"language_code":"eng","language_probability":0.99,"text":"Hello world. Bye.","words":[
			{"text":"Hello","start":0.1,"end":0.5,"type":"word","speaker_id":"speaker_0","logprob":-0.1},
			{"text":" ","start":0.5,"end":0.6,"type":"spacing","speaker_id":"speaker_0","logprob":0},
			{"text":"world.","start":0.6,"end":1.25,"type":"word","speaker_id":"speaker_0","logprob":-0.2},
			{"text":" ","start":1.25,"end":2,"type":"spacing","speaker_id":"speaker_0","logprob":0},
			{"text":"Bye.","start":2,"end":2.75,"type":"word","speaker_id":"speaker_0","logprob":-0.1}]}`)
	}))
	defer srv.Close()
	spec := provider.Spec{ID: "elevenlabs", Auth: provider.AuthXIAPIKey, Format: provider.FormatElevenLabs}
	for _, tc := range []struct{ format, body, contentType string }{
		{"srt", "1\n00:00:00,100 --> 00:00:01,250\nHello world.\n\n2\n00:00:02,000 --> 00:00:02,750\nBye.\n\n", "text/plain; charset=utf-8"},
		{"vtt", "WEBVTT\n\n00:00:00.100 --> 00:00:01.250\nHello world.\n\n00:00:02.000 --> 00:00:02.750\nBye.\n\n", "text/plain; charset=utf-8"},
		{"text", "Hello world. Bye.\n", "text/plain; charset=utf-8"},
		{"json", `{"text":"Hello world. Bye."}`, "application/json"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			out, err := transcribeWith(t, spec, srv.URL, "scribe_v1", tc.format, []byte("audio"))
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(out.Body))
			assert.Equal(t, tc.contentType, out.ContentType)
			assert.Equal(t, 2.75, out.Seconds)
		})
	}
}

// multipartFormOf builds a transcription form: the fields, then the file.
func multipartFormOf(t *testing.T, audio []byte, fields ...string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		require.NoError(t, mw.WriteField(fields[i], fields[i+1]))
	}
	fw, err := mw.CreateFormFile("file", "a.wav")
	require.NoError(t, err)
	_, err = fw.Write(audio)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	return &buf, mw.FormDataContentType()
}

// formValue is a field of the form an upstream received.
func formValue(t *testing.T, r upstreamtest.Request, name string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(r.Body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	require.NoError(t, req.ParseMultipartForm(1<<20))
	return req.FormValue(name)
}

// fakeScribe is a fake of ElevenLabs' POST /speech-to-text. It answers
// text as ElevenLabs does: the transcript and its words, one entry a word
// and one for the spacing between two, the words spread evenly over the
// first spoken seconds of the audio. The times are those
// timestamps_granularity asks for: "word" (ElevenLabs' default) or
// "character" give each entry a start and an end, "none" gives none. It
// records the forms it was sent.
type fakeScribe struct {
	URL   string
	mu    sync.Mutex
	forms []url.Values
}

func newFakeScribe(t *testing.T, text string, spoken float64) *fakeScribe {
	f := &fakeScribe{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/speech-to-text" || r.ParseMultipartForm(1<<20) != nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		f.mu.Lock()
		f.forms = append(f.forms, r.MultipartForm.Value)
		f.mu.Unlock()
		granularity := r.FormValue("timestamps_granularity")
		if granularity == "" {
			granularity = "word"
		}
		if _, _, err := r.FormFile("file"); err != nil || r.FormValue("model_id") == "" || !slices.Contains([]string{"none", "word", "character"}, granularity) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"detail":[{"loc":["body"],"msg":"invalid request","type":"value_error"}]}`)
			return
		}
		fields := strings.Fields(text)
		each := spoken / float64(len(fields))
		words := []map[string]any{}
		entry := func(text, kind string, start, end float64) {
			e := map[string]any{"text": text, "type": kind, "speaker_id": "speaker_0", "logprob": -0.1, "start": nil, "end": nil}
			if granularity != "none" {
				e["start"], e["end"] = start, end
			}
			words = append(words, e)
		}
		for i, word := range fields {
			start := float64(i) * each
			if i > 0 {
				entry(" ", "spacing", start, start)
			}
			entry(word, "word", start, start+each)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"language_code": "eng", "language_probability": 0.98, "text": text, "words": words,
			"transcription_id": "tr_" + strconv.Itoa(len(f.forms)),
		})
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// last is the form of the latest request.
func (f *fakeScribe) last(t *testing.T) url.Values {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.forms)
	return f.forms[len(f.forms)-1]
}

var elevenLabsSpec = provider.Spec{ID: "elevenlabs", Auth: provider.AuthXIAPIKey, Format: provider.FormatElevenLabs}

// ElevenLabs is asked for word timestamps in every format, so that
// subtitles and metering never depend on the upstream's default.
func TestAudioElevenLabsAsksForWordTimestamps(t *testing.T) {
	up := newFakeScribe(t, "Hello world. Bye.", 2.5)
	for _, format := range []string{"", "json", "text", "srt", "vtt", "verbose_json"} {
		out, err := transcribeWith(t, elevenLabsSpec, up.URL, "scribe_v1", format, []byte("audio"))
		require.NoError(t, err, format)
		assert.Equal(t, []string{"word"}, up.last(t)["timestamps_granularity"], format)
		assert.Equal(t, 2.5, out.Seconds, format)
	}
}

// An ElevenLabs-shaped answer without timestamps (words without times, or
// no words at all) still gives subtitles that follow the audio: the words
// are spread over the duration the file's header tells, in proportion to
// their length, not all set at 0. When that duration is not known either,
// the answer is a bad upstream answer, which the next connection may
// answer better.
func TestAudioElevenLabsSubtitlesWithoutTimestamps(t *testing.T) {
	untimed := answering(t, "application/json", `{"language_code":"eng","language_probability":0.98,"text":"Hi there. Bye now.","words":[
		{"text":"Hi","start":null,"end":null,"type":"word","speaker_id":"speaker_0","logprob":-0.1},
		{"text":" ","start":null,"end":null,"type":"spacing","speaker_id":"speaker_0","logprob":0},
		{"text":"there.","start":null,"end":null,"type":"word","speaker_id":"speaker_0","logprob":-0.1},
		{"text":" ","start":null,"end":null,"type":"spacing","speaker_id":"speaker_0","logprob":0},
		{"text":"Bye","start":null,"end":null,"type":"word","speaker_id":"speaker_0","logprob":-0.1},
		{"text":" ","start":null,"end":null,"type":"spacing","speaker_id":"speaker_0","logprob":0},
		{"text":"now.","start":null,"end":null,"type":"word","speaker_id":"speaker_0","logprob":-0.1}]}`)
	wordless := answering(t, "application/json", `{"language_code":"eng","language_probability":0.98,"text":"Hi there. Bye now.","words":[]}`)
	const want = "1\n00:00:00,000 --> 00:00:01,600\nHi there.\n\n2\n00:00:01,600 --> 00:00:03,000\nBye now.\n\n"
	for name, url := range map[string]string{"words without times": untimed, "no words": wordless} {
		t.Run(name, func(t *testing.T) {
			out, err := transcribeWith(t, elevenLabsSpec, url, "scribe_v1", "srt", pcmWAV(3))
			require.NoError(t, err)
			assert.Equal(t, want, string(out.Body))
			assert.Equal(t, 3.0, out.Seconds)

			_, err = transcribeWith(t, elevenLabsSpec, url, "scribe_v1", "vtt", []byte("\x1aE\xdf\xa3 webm"))
			var up *credential.UpstreamError
			require.ErrorAs(t, err, &up)
			assert.Equal(t, http.StatusBadGateway, up.Status)
		})
	}
	t.Run("silence", func(t *testing.T) {
		out, err := transcribeWith(t, elevenLabsSpec, answering(t, "application/json", `{"language_code":"eng","language_probability":0.5,"text":"","words":[]}`), "scribe_v1", "vtt", []byte("not audio"))
		require.NoError(t, err)
		assert.Equal(t, "WEBVTT\n\n", string(out.Body))
	})
}

// verbose_json from ElevenLabs is OpenAI's: the audio's duration, the
// language, segments cut as subtitles are, and words when
// timestamp_granularities asks for them, where it was the bare text.
func TestAudioElevenLabsVerboseJSON(t *testing.T) {
	up := newFakeScribe(t, "Hello world. Bye.", 3)
	out, err := transcribeWith(t, elevenLabsSpec, up.URL, "scribe_v1", "verbose_json", pcmWAV(4))
	require.NoError(t, err)
	assert.Equal(t, "application/json", out.ContentType)
	assert.JSONEq(t, `{"task":"transcribe","language":"eng","duration":4,"text":"Hello world. Bye.","segments":[
		{"id":0,"seek":0,"start":0,"end":2,"text":" Hello world."},
		{"id":1,"seek":0,"start":2,"end":3,"text":" Bye."}]}`, string(out.Body))
	assert.Equal(t, 4.0, out.Seconds)

	out, err = transcribeWith(t, elevenLabsSpec, up.URL, "scribe_v1", "verbose_json", pcmWAV(4), "word")
	require.NoError(t, err)
	assert.JSONEq(t, `{"task":"transcribe","language":"eng","duration":4,"text":"Hello world. Bye.","words":[
		{"word":"Hello","start":0,"end":1},
		{"word":"world.","start":1,"end":2},
		{"word":"Bye.","start":2,"end":3}]}`, string(out.Body))

	silence := newFakeScribe(t, "", 0)
	out, err = transcribeWith(t, elevenLabsSpec, silence.URL, "scribe_v1", "verbose_json", pcmWAV(1), "word", "segment")
	require.NoError(t, err)
	assert.JSONEq(t, `{"task":"transcribe","language":"eng","duration":1,"text":"","segments":[],"words":[]}`, string(out.Body))
}
