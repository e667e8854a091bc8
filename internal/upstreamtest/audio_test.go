package upstreamtest_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// multipartBody builds a transcription request; file is omitted when nil.
func multipartBody(t *testing.T, file []byte, fields ...string) (body []byte, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		require.NoError(t, mw.WriteField(fields[i], fields[i+1]))
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", "speech.wav")
		require.NoError(t, err)
		_, err = fw.Write(file)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return buf.Bytes(), mw.FormDataContentType()
}

func postMultipart(t *testing.T, s *upstreamtest.Server, path string, file []byte, fields ...string) (*http.Response, []byte) {
	t.Helper()
	body, ct := multipartBody(t, file, fields...)
	return post(t, s, path, string(body), "Content-Type", ct)
}

func TestTranscription(t *testing.T) {
	s := upstreamtest.New(t)
	audio := upstreamtest.SpeechAudio("hello", "wav")
	resp, body := postMultipart(t, s, upstreamtest.PathTranscriptions, audio, "model", "whisper-1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	requireSameShape(t, decode(t, fixture(t, "openai/audio-transcription-basic.json")), decode(t, body))
	var got struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, upstreamtest.Transcript(audio), got.Text)

	reqs := s.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "speech.wav", reqs[0].FileName)
	require.Equal(t, audio, reqs[0].File)

	// Translations answer the same text, without usage.
	_, body = postMultipart(t, s, upstreamtest.PathTranslations, audio, "model", "whisper-1")
	require.JSONEq(t, `{"text":`+string(mustJSON(t, upstreamtest.Transcript(audio)))+`}`, string(body))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestTranscriptionFormats(t *testing.T) {
	s := upstreamtest.New(t)
	audio := []byte("not really audio")
	text := upstreamtest.Transcript(audio)
	sentences := strings.SplitAfter(text, ". ")
	require.Len(t, sentences, 2)
	first, second := strings.TrimSpace(sentences[0]), sentences[1]

	resp, body := postMultipart(t, s, upstreamtest.PathTranscriptions, audio, "model", "whisper-1", "response_format", "text")
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, text+"\n", string(body))

	resp, body = postMultipart(t, s, upstreamtest.PathTranscriptions, audio, "model", "whisper-1", "response_format", "srt")
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "1\n00:00:00,000 --> 00:00:02,000\n"+first+"\n\n2\n00:00:02,000 --> 00:00:04,000\n"+second+"\n\n", string(body))

	resp, body = postMultipart(t, s, upstreamtest.PathTranscriptions, audio, "model", "whisper-1", "response_format", "vtt")
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n"+first+"\n\n00:00:02.000 --> 00:00:04.000\n"+second+"\n\n", string(body))

	resp, body = postMultipart(t, s, upstreamtest.PathTranscriptions, audio, "model", "whisper-1", "response_format", "verbose_json", "language", "en")
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var verbose struct {
		Task     string  `json:"task"`
		Language string  `json:"language"`
		Duration float64 `json:"duration"`
		Text     string  `json:"text"`
		Segments []struct {
			ID    int     `json:"id"`
			Start float64 `json:"start"`
			End   float64 `json:"end"`
			Text  string  `json:"text"`
		} `json:"segments"`
	}
	require.NoError(t, json.Unmarshal(body, &verbose))
	require.Equal(t, "transcribe", verbose.Task)
	require.Equal(t, "en", verbose.Language)
	require.Equal(t, text, verbose.Text)
	require.Equal(t, 4.0, verbose.Duration)
	require.Len(t, verbose.Segments, 2)
	require.Equal(t, " "+first, verbose.Segments[0].Text)
	require.Equal(t, 2.0, verbose.Segments[1].Start)
}

func TestTranscriptionValidation(t *testing.T) {
	s := upstreamtest.New(t)
	for _, tc := range []struct {
		name    string
		file    []byte
		fields  []string
		message string
	}{
		{"no file", nil, []string{"model", "whisper-1"}, "body -> file"},
		{"no model", []byte("x"), nil, "you must provide a model parameter"},
		{"bad format", []byte("x"), []string{"model", "whisper-1", "response_format", "docx"}, "Invalid value: 'docx'"},
		{"subtitles of a token-billed model", []byte("x"), []string{"model", "gpt-4o-transcribe", "response_format", "srt"}, "not compatible with model 'gpt-4o-transcribe'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := postMultipart(t, s, upstreamtest.PathTranscriptions, tc.file, tc.fields...)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			var e openAIError
			require.NoError(t, json.Unmarshal(body, &e))
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
	resp, _ := post(t, s, upstreamtest.PathTranscriptions, `{"model":"whisper-1"}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestSpeech(t *testing.T) {
	s := upstreamtest.New(t)
	for format, contentType := range map[string]string{
		"": "audio/mpeg", "mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac",
		"flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm",
	} {
		t.Run(format, func(t *testing.T) {
			resp, body := post(t, s, upstreamtest.PathSpeech,
				`{"model":"gpt-4o-mini-tts","voice":"alloy","input":"Hello there, how are you?","response_format":"`+format+`"}`)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, contentType, resp.Header.Get("Content-Type"))
			require.Equal(t, []string{"chunked"}, resp.TransferEncoding, "audio is streamed")
			require.Equal(t, upstreamtest.SpeechAudio("Hello there, how are you?", format), body)
		})
	}

	wav := upstreamtest.SpeechAudio("Hello there, how are you?", "wav")
	require.Equal(t, "RIFF", string(wav[:4]))
	require.Equal(t, "WAVE", string(wav[8:12]))
	require.Equal(t, uint32(len(wav)-8), binary.LittleEndian.Uint32(wav[4:]))
	require.Equal(t, uint32(len(wav)-44), binary.LittleEndian.Uint32(wav[40:]))
	require.Equal(t, wav[44:], upstreamtest.SpeechAudio("Hello there, how are you?", "pcm"))
	require.Greater(t, len(wav), 3*2048, "long enough to be sent in several chunks")
}

func TestSpeechChunksArriveSeparately(t *testing.T) {
	s := upstreamtest.New(t)
	s.Enqueue(upstreamtest.PathSpeech, upstreamtest.StallAfter(1))
	resp, err := do(t, t.Context(), newClient(t), s, http.MethodPost, upstreamtest.PathSpeech,
		[]byte(`{"model":"tts-1","voice":"alloy","input":"Hello there, how are you?","response_format":"pcm"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	// The first chunk arrives although the server stalls after it.
	first := make([]byte, 2048)
	_, err = io.ReadFull(resp.Body, first)
	require.NoError(t, err)
	require.Equal(t, upstreamtest.SpeechAudio("Hello there, how are you?", "pcm")[:2048], first)
}

func TestSpeechValidation(t *testing.T) {
	s := upstreamtest.New(t)
	for _, tc := range []struct{ name, body, message string }{
		{"no input", `{"model":"tts-1","voice":"alloy"}`, "Missing required parameter: 'input'."},
		{"no voice", `{"model":"tts-1","input":"x"}`, "Missing required parameter: 'voice'."},
		{"no model", `{"voice":"alloy","input":"x"}`, "you must provide a model parameter"},
		{"bad format", `{"model":"tts-1","voice":"alloy","input":"x","response_format":"ogg"}`, "Invalid value: 'ogg'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, s, upstreamtest.PathSpeech, tc.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			var e openAIError
			require.NoError(t, json.Unmarshal(body, &e))
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
}

// A token-billed model (gpt-4o-transcribe) reports its tokens in json, as
// OpenAI's does, and answers plain text with no usage at all.
func TestTranscriptionTokenBilled(t *testing.T) {
	s := upstreamtest.New(t)
	audio := upstreamtest.SpeechAudio("hello", "wav")
	resp, body := postMultipart(t, s, upstreamtest.PathTranscriptions, audio, "model", "gpt-4o-transcribe")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var got struct {
		Text  string `json:"text"`
		Usage struct {
			Type         string `json:"type"`
			InputTokens  int    `json:"input_tokens"`
			OutputTokens int    `json:"output_tokens"`
			TotalTokens  int    `json:"total_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	in, out := upstreamtest.TranscriptionTokens(audio)
	require.Equal(t, upstreamtest.Transcript(audio), got.Text)
	require.Equal(t, "tokens", got.Usage.Type)
	require.Equal(t, []int{in, out, in + out}, []int{got.Usage.InputTokens, got.Usage.OutputTokens, got.Usage.TotalTokens})

	resp, body = postMultipart(t, s, upstreamtest.PathTranscriptions, audio, "model", "gpt-4o-transcribe", "response_format", "text")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, upstreamtest.Transcript(audio)+"\n", string(body))
}
