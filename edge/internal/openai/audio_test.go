package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// fakeRouter records what the edge streams to core.
type fakeRouter struct {
	corev1.UnimplementedRouterServer
	mu     sync.Mutex
	calls  int
	chunks int
	audio  []byte
	opts   *corev1.TranscribeOptions
	answer *corev1.TranscribeResponse
	// events, when set, are a streamed transcription's answer, one message
	// each, the first with text/event-stream; failAt fails it after this
	// many (0: never).
	events  [][]byte
	speech  [][]byte
	failAt  int // Speech: fail after this many audio chunks (0: never); a streamed transcription after this many events
	authErr bool
}

func (f *fakeRouter) StreamTranscription(s grpc.BidiStreamingServer[corev1.StreamTranscriptionRequest, corev1.StreamTranscriptionResponse]) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.authErr {
		return status.Error(codes.Unauthenticated, "invalid API key")
	}
	for {
		m, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		f.mu.Lock()
		if o := m.GetOptions(); o != nil {
			f.opts = o
		} else {
			f.chunks++
			f.audio = append(f.audio, m.GetAudio()...)
		}
		f.mu.Unlock()
	}
	if f.events == nil {
		return s.Send(&corev1.StreamTranscriptionResponse{Body: f.answer.GetBody(), ContentType: f.answer.GetContentType()})
	}
	for i, e := range f.events {
		if f.failAt > 0 && i == f.failAt {
			return status.Error(codes.Unavailable, "upstream went away")
		}
		m := &corev1.StreamTranscriptionResponse{Body: e}
		if i == 0 {
			m.ContentType = "text/event-stream"
		}
		if err := s.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeRouter) Speech(req *corev1.SpeechRequest, s grpc.ServerStreamingServer[corev1.SpeechResponse]) error {
	if !json.Valid(req.GetBody()) {
		return status.Error(codes.InvalidArgument, "bad json")
	}
	if err := s.Send(&corev1.SpeechResponse{Part: &corev1.SpeechResponse_ContentType{ContentType: "audio/wav"}}); err != nil {
		return err
	}
	for i, c := range f.speech {
		if f.failAt > 0 && i == f.failAt {
			return status.Error(codes.Unavailable, "upstream went away")
		}
		if err := s.Send(&corev1.SpeechResponse{Part: &corev1.SpeechResponse_Audio{Audio: c}}); err != nil {
			return err
		}
	}
	return nil
}

func newFakeRouter(t *testing.T, f *fakeRouter) corev1.RouterClient {
	t.Helper()
	return serveRouter(t, f)
}

// form builds a multipart body; a field named "file" is a file part.
func form(t testing.TB, parts ...[2]string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		if p[0] == "file" {
			w, err := mw.CreateFormFile("file", "speech.wav")
			require.NoError(t, err)
			_, _ = w.Write([]byte(p[1]))
			continue
		}
		require.NoError(t, mw.WriteField(p[0], p[1]))
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

func TestTranscriptionsHandler(t *testing.T) {
	audio := strings.Repeat("0123456789abcdef", 10000) // 160 kB: several chunks
	do := func(h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/audio/transcriptions", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer sk-x")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	code := func(rec *httptest.ResponseRecorder) string {
		var b ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b), rec.Body.String())
		if b.Error.Code == nil {
			return ""
		}
		return *b.Error.Code
	}

	t.Run("file first, fields after: streamed in chunks, options last", func(t *testing.T) {
		f := &fakeRouter{answer: &corev1.TranscribeResponse{Body: []byte("1\n00:00:00,000 --> 00:00:02,000\nhi\n"), ContentType: "text/plain; charset=utf-8"}}
		h := &Transcriptions{Router: newFakeRouter(t, f)}
		ct, body := form(t, [2]string{"file", audio}, [2]string{"model", "openai/whisper-1"}, [2]string{"response_format", "srt"},
			[2]string{"language", "en"}, [2]string{"prompt", "p"}, [2]string{"temperature", "0.3"},
			[2]string{"timestamp_granularities[]", "word"}, [2]string{"timestamp_granularities[]", "segment"}, [2]string{"unknown", "x"})
		rec := do(h, ct, body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
		assert.Equal(t, string(f.answer.Body), rec.Body.String())
		assert.Equal(t, audio, string(f.audio))
		assert.Greater(t, f.chunks, 1)
		assert.Equal(t, "openai/whisper-1", f.opts.GetModel())
		assert.Equal(t, "speech.wav", f.opts.GetFilename())
		assert.Equal(t, "application/octet-stream", f.opts.GetContentType())
		assert.Equal(t, "srt", f.opts.GetResponseFormat())
		assert.Equal(t, "en", f.opts.GetLanguage())
		assert.Equal(t, "p", f.opts.GetPrompt())
		assert.InDelta(t, 0.3, f.opts.GetTemperature(), 1e-6)
		assert.Equal(t, []string{"word", "segment"}, f.opts.GetTimestampGranularities())
		require.Len(t, f.opts.GetExtraFields(), 1, "a field the gateway does not read is kept for the upstream")
		assert.Equal(t, "unknown", f.opts.GetExtraFields()[0].GetName())
		assert.Equal(t, "x", f.opts.GetExtraFields()[0].GetValue())
	})
	t.Run("too large: 413, core never gets the options", func(t *testing.T) {
		f := &fakeRouter{answer: &corev1.TranscribeResponse{}}
		h := &Transcriptions{Router: newFakeRouter(t, f), MaxBytes: 100_000}
		ct, body := form(t, [2]string{"model", "m"}, [2]string{"file", audio})
		rec := do(h, ct, body)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
		assert.Equal(t, "request_too_large", code(rec))
		f.mu.Lock()
		defer f.mu.Unlock()
		assert.Nil(t, f.opts)
	})
	// The form around the file may add formSlack: fields and part headers
	// past it are refused as they arrive, never held (the route streams
	// its body, outside the body memory bound) nor sent to core.
	t.Run("fields past the form's slack: 413, core never gets them", func(t *testing.T) {
		f := &fakeRouter{answer: &corev1.TranscribeResponse{}}
		h := &Transcriptions{Router: newFakeRouter(t, f)}
		parts := [][2]string{{"file", audio}, {"model", "m"}}
		for range 20 { // 20 fields of 60 kB each: 1.2 MB
			parts = append(parts, [2]string{"timestamp_granularities[]", strings.Repeat("w", 60_000)})
		}
		ct, body := form(t, parts...)
		rec := do(h, ct, body)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
		assert.Equal(t, "request_too_large", code(rec))
		f.mu.Lock()
		defer f.mu.Unlock()
		assert.Nil(t, f.opts)
	})
	t.Run("a part header past the form's slack: 413", func(t *testing.T) {
		f := &fakeRouter{answer: &corev1.TranscribeResponse{}}
		h := &Transcriptions{Router: newFakeRouter(t, f)}
		body := "--b\r\nContent-Disposition: form-data; name=\"model\"\r\nX-Pad: " + strings.Repeat("p", 2<<20) + "\r\n\r\nm\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--b--\r\n"
		rec := do(h, "multipart/form-data; boundary=b", []byte(body))
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
		assert.Equal(t, "request_too_large", code(rec))
	})
	t.Run("declared length over the limit: 413 before reading", func(t *testing.T) {
		f := &fakeRouter{}
		h := &Transcriptions{Router: newFakeRouter(t, f), MaxBytes: 10}
		ct, body := form(t, [2]string{"model", "m"}, [2]string{"file", audio})
		rec := do(h, ct, body)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
		assert.Zero(t, f.calls)
	})
	for _, tc := range []struct {
		name        string
		contentType string
		parts       [][2]string
		status      int
		code        string
	}{
		{"no model", "", [][2]string{{"file", "abc"}}, 400, "missing_required_parameter"},
		{"no file", "", [][2]string{{"model", "m"}}, 400, "missing_required_parameter"},
		{"empty file", "", [][2]string{{"model", "m"}, {"file", ""}}, 400, "invalid_value"},
		{"two files", "", [][2]string{{"model", "m"}, {"file", "a"}, {"file", "b"}}, 400, "invalid_value"},
		{"bad temperature", "", [][2]string{{"model", "m"}, {"temperature", "hot"}, {"file", "a"}}, 400, "invalid_type"},
		{"too many other fields", "", append([][2]string{{"model", "m"}, {"file", "a"}}, slices.Repeat([][2]string{{"include[]", "logprobs"}}, 65)...), 400, "array_above_max_length"},
		{"JSON instead of a form", "application/json", nil, 415, "invalid_content_type"},
		{"form without boundary", "multipart/form-data", nil, 415, "invalid_content_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRouter{answer: &corev1.TranscribeResponse{}}
			h := &Transcriptions{Router: newFakeRouter(t, f)}
			ct, body := form(t, tc.parts...)
			if tc.contentType != "" {
				ct = tc.contentType
			}
			rec := do(h, ct, body)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			assert.Equal(t, tc.code, code(rec))
			assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		})
	}
	t.Run("truncated form: 400", func(t *testing.T) {
		f := &fakeRouter{answer: &corev1.TranscribeResponse{}}
		h := &Transcriptions{Router: newFakeRouter(t, f)}
		ct, body := form(t, [2]string{"model", "m"}, [2]string{"file", audio})
		rec := do(h, ct, body[:len(body)/2])
		require.Equal(t, http.StatusBadRequest, rec.Code)
		assert.Equal(t, "invalid_body", code(rec))
	})
	t.Run("stream: the events as core sends them, an error event after a failure", func(t *testing.T) {
		events := [][]byte{
			[]byte("data: {\"type\":\"transcript.text.delta\",\"delta\":\"hi\"}\n\n"),
			[]byte("data: {\"type\":\"transcript.text.done\",\"text\":\"hi\"}\n\n"),
		}
		f := &fakeRouter{events: events}
		h := &Transcriptions{Router: newFakeRouter(t, f)}
		ct, body := form(t, [2]string{"file", audio}, [2]string{"model", "m"}, [2]string{"stream", "true"})
		rec := do(h, ct, body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
		assert.Equal(t, string(events[0])+string(events[1]), rec.Body.String())
		assert.True(t, f.opts.GetStream())

		f = &fakeRouter{events: events, failAt: 1}
		h = &Transcriptions{Router: newFakeRouter(t, f)}
		rec = do(h, ct, body)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		first, rest, _ := strings.Cut(rec.Body.String(), "\n\n")
		assert.Equal(t, string(events[0]), first+"\n\n")
		assert.True(t, strings.HasPrefix(rest, `data: {"error":{`), rest)
	})
	t.Run("stream that is not a boolean: 400", func(t *testing.T) {
		f := &fakeRouter{answer: &corev1.TranscribeResponse{}}
		h := &Transcriptions{Router: newFakeRouter(t, f)}
		ct, body := form(t, [2]string{"model", "m"}, [2]string{"file", "a"}, [2]string{"stream", "yes please"})
		rec := do(h, ct, body)
		require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
		assert.Equal(t, "invalid_type", code(rec))
	})
	t.Run("core refuses the caller: its status", func(t *testing.T) {
		f := &fakeRouter{authErr: true}
		h := &Transcriptions{Router: newFakeRouter(t, f)}
		ct, body := form(t, [2]string{"model", "m"}, [2]string{"file", audio})
		rec := do(h, ct, body)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
	})
}

func TestSpeechHandler(t *testing.T) {
	chunks := [][]byte{[]byte("RIFF"), []byte("data-1"), []byte("data-2")}
	t.Run("streamed with the content type", func(t *testing.T) {
		h := &Speech{Router: newFakeRouter(t, &fakeRouter{speech: chunks})}
		srv := httptest.NewServer(h)
		defer srv.Close()
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"model":"m","input":"x","voice":"v"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "audio/wav", resp.Header.Get("Content-Type"))
		assert.Equal(t, "RIFFdata-1data-2", string(body))
	})
	t.Run("error before audio: OpenAI error", func(t *testing.T) {
		h := &Speech{Router: newFakeRouter(t, &fakeRouter{})}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/audio/speech", strings.NewReader(`{`)))
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	})
	t.Run("failure mid-stream: the response is cut", func(t *testing.T) {
		h := &Speech{Router: newFakeRouter(t, &fakeRouter{speech: chunks, failAt: 2})}
		srv := httptest.NewServer(h)
		defer srv.Close()
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"model":"m","input":"x","voice":"v"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		require.Error(t, err, "a truncated body, not a short one that looks whole")
	})
}

func FuzzReadTranscriptionForm(f *testing.F) {
	ct, body := form(f, [2]string{"model", "m"}, [2]string{"file", "RIFF...."}, [2]string{"temperature", "0.1"})
	_ = ct
	f.Add(body, int64(100))
	f.Add(body, int64(3))
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--x--\r\n"), int64(10))
	f.Add([]byte("garbage"), int64(10))
	boundary := body[2:bytes.IndexByte(body, '\r')]
	f.Fuzz(func(t *testing.T, data []byte, limit int64) {
		if limit <= 0 {
			limit = 1
		}
		for _, b := range [][]byte{boundary, []byte("x")} {
			var got []byte
			form, p := ReadTranscriptionForm(bytes.NewReader(data), string(b), limit, func(c []byte) *Problem {
				got = append(got, c...)
				return nil
			})
			if p != nil {
				require.GreaterOrEqual(t, p.Status, 400)
				continue
			}
			require.NotNil(t, form.Options)
			require.LessOrEqual(t, form.Size, limit)
			require.EqualValues(t, form.Size, len(got))
			if !form.HasFile {
				require.Zero(t, form.Size)
			}
		}
	})
}
