package audio

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
)

func TestAudioSpool(t *testing.T) {
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name    string
		memMax  int
		spilled bool
	}{
		{"in memory", 4096, false},
		{"spilled to a file", 1000, true},
		{"spilled at once", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := NewSpool(dir, tc.memMax, 0)
			for off := 0; off < len(data); off += 700 {
				n, err := s.Write(data[off:min(off+700, len(data))])
				require.NoError(t, err)
				require.Equal(t, min(700, len(data)-off), n)
			}
			assert.EqualValues(t, len(data), s.Size())
			assert.Equal(t, tc.spilled, s.Spilled())
			for range 3 { // every reader starts from the beginning
				got, err := io.ReadAll(s.Reader())
				require.NoError(t, err)
				require.Equal(t, data, got)
			}
			require.NoError(t, s.Close())
			files, _ := os.ReadDir(dir)
			assert.Empty(t, files, "the temporary file is removed")
		})
	}
	t.Run("limit", func(t *testing.T) {
		s := NewSpool(t.TempDir(), 10, 20)
		defer s.Close()
		_, err := s.Write(make([]byte, 15))
		require.NoError(t, err)
		_, err = s.Write(make([]byte, 6))
		require.ErrorIs(t, err, ErrTooLarge)
		_, err = s.Write(make([]byte, 5))
		require.NoError(t, err, "exactly the limit is fine")
		assert.EqualValues(t, 20, s.Size())
	})
}

func TestAudioWriteForm(t *testing.T) {
	s := NewSpool(t.TempDir(), 16, 0)
	defer s.Close()
	audio := bytes.Repeat([]byte("RIFF\x00\x01wave"), 50)
	_, err := s.Write(audio)
	require.NoError(t, err)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	temp := float32(0.2)
	req := TranscribeRequest{Filename: `a "quoted"` + "\r\nX: y.wav", ContentType: "audio/wav\r\nInjected: 1", Temperature: &temp}
	require.NoError(t, writeForm(mw, []Field{{"model", "whisper-1"}, {"timestamp_granularities[]", "word"}}, req, s))

	_, params, err := mime.ParseMediaType(mw.FormDataContentType())
	require.NoError(t, err)
	mr := multipart.NewReader(&buf, params["boundary"])
	got := map[string]string{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(p)
		require.NoError(t, err)
		got[p.FormName()] = string(b)
		if p.FormName() == "file" {
			assert.Equal(t, `a "quoted"X: y.wav`, p.FileName())
			assert.Equal(t, "application/octet-stream", p.Header.Get("Content-Type"), "a malformed type is not passed on")
			assert.Empty(t, p.Header.Get("Injected"))
		}
	}
	assert.Equal(t, map[string]string{"model": "whisper-1", "timestamp_granularities[]": "word", "file": string(audio)}, got)
}

func TestAudioSplitVoice(t *testing.T) {
	for _, tc := range []struct {
		model, voice, wantModel, wantVoice string
	}{
		{"openai/gpt-4o-mini-tts:alloy", "", "openai/gpt-4o-mini-tts", "alloy"},
		{"openai/gpt-4o-mini-tts:alloy", "alloy", "openai/gpt-4o-mini-tts", "alloy"},
		{"openai/tts-1", "nova", "openai/tts-1", "nova"},
		{"elevenlabs/eleven_multilingual_v2:JBFqnCBsd6RMkjVDRZzb", "", "elevenlabs/eleven_multilingual_v2", "JBFqnCBsd6RMkjVDRZzb"},
		{"local/orpheus:3b", "tara", "local/orpheus:3b", "tara"}, // a model id with a colon of its own
		{"tts-1:echo", "", "tts-1", "echo"},
		{"ollama:model/name", "v", "ollama:model/name", "v"}, // the colon is not in the last segment
		{"openai/tts-1:", "x", "openai/tts-1:", "x"},
		{"openai/:x", "", "openai/:x", ""},
	} {
		m, v := SplitVoice(tc.model, tc.voice)
		assert.Equal(t, tc.wantModel, m, tc.model)
		assert.Equal(t, tc.wantVoice, v, tc.model)
	}
}

func TestAudioParseSpeech(t *testing.T) {
	ok := func(body string) SpeechRequest {
		t.Helper()
		r, err := ParseSpeech([]byte(body))
		require.NoError(t, err, body)
		return r
	}
	r := ok(`{"model":"openai/tts-1","input":"héllo","voice":"alloy","speed":1.5,"instructions":"calm"}`)
	assert.Equal(t, "openai/tts-1", r.Model)
	assert.Equal(t, "alloy", r.Voice)
	assert.EqualValues(t, 5, r.Characters())
	assert.Equal(t, 1.5, *r.Speed)
	assert.Contains(t, r.fields, "instructions", "unknown members are kept for the upstream")

	r = ok(`{"model":"openai/gpt-4o-mini-tts:coral","input":"x"}`)
	assert.Equal(t, "openai/gpt-4o-mini-tts", r.Model)
	assert.Equal(t, "coral", r.Voice)

	r = ok(`{"model":"openai/gpt-4o-mini-tts","input":"x","voice":{"id":"voice_123"}}`)
	assert.Equal(t, "voice_123", r.Voice)
	assert.JSONEq(t, `{"id":"voice_123"}`, string(r.VoiceRaw))

	for _, tc := range []struct{ body, param string }{
		{`nope`, ""},
		{`[]`, ""},
		{`{"input":"x","voice":"a"}`, "model"},
		{`{"model":"","input":"x","voice":"a"}`, "model"},
		{`{"model":"m","voice":"a"}`, "input"},
		{`{"model":"m","input":"","voice":"a"}`, "input"},
		{`{"model":"m","input":3,"voice":"a"}`, "input"},
		{`{"model":"m","input":"x"}`, "voice"},
		{`{"model":"m","input":"x","voice":5}`, "voice"},
		{`{"model":"m","input":"x","voice":"a","response_format":"ogg"}`, "response_format"},
		{`{"model":"m","input":"x","voice":"a","speed":9}`, "speed"},
		{`{"model":"m","input":"x","voice":"a","speed":"fast"}`, "speed"},
		{`{"model":"m","input":"x","voice":".."}`, "voice"},
		{`{"model":"m:..","input":"x"}`, "voice"},
		{`{"model":"m","input":"x","voice":{"id":"."}}`, "voice"},
	} {
		_, err := ParseSpeech([]byte(tc.body))
		var inv *InvalidError
		require.ErrorAs(t, err, &inv, tc.body)
		assert.Equal(t, tc.param, inv.Param, tc.body)
	}
}

func TestAudioOpenAISpeechBody(t *testing.T) {
	req, err := ParseSpeech([]byte(`{"model":"openai/gpt-4o-mini-tts:ash","input":"hi","response_format":"wav","instructions":"whisper"}`))
	require.NoError(t, err)
	hreq, err := openAISpeech(context.Background(), routing.Target{Model: "gpt-4o-mini-tts"}, &dispatch.Conn{BaseURL: "http://up/v1"}, req)
	require.NoError(t, err)
	assert.Equal(t, "http://up/v1/audio/speech", hreq.URL.String())
	body, err := io.ReadAll(hreq.Body)
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"gpt-4o-mini-tts","voice":"ash","input":"hi","response_format":"wav","instructions":"whisper"}`, string(body))

	speed := 1.25
	req.Speed = &speed
	hreq, err = elevenLabsSpeech(context.Background(), routing.Target{Model: "eleven_v3"}, &dispatch.Conn{BaseURL: "http://el/v1"}, req)
	require.NoError(t, err)
	assert.Equal(t, "http://el/v1/text-to-speech/ash/stream?output_format=wav_44100", hreq.URL.String())
	body, err = io.ReadAll(hreq.Body)
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":"hi","model_id":"eleven_v3","voice_settings":{"speed":1.25}}`, string(body))

	req.Format = "flac"
	_, err = elevenLabsSpeech(context.Background(), routing.Target{Model: "eleven_v3"}, &dispatch.Conn{BaseURL: "http://el/v1"}, req)
	var up *credential.UpstreamError
	require.ErrorAs(t, err, &up, "an answer the client gets, not a connection failure")
	assert.Equal(t, 400, up.Status)
}

func TestAudioVoiceLanguages(t *testing.T) {
	assert.True(t, speaks([]string{"*"}, "de"))
	assert.True(t, speaks([]string{"en"}, "en-US"))
	assert.True(t, speaks([]string{"en-GB"}, "EN"))
	assert.False(t, speaks([]string{"fr"}, "en"))
	assert.False(t, speaks(nil, "en"))
}

func TestAudioSpoolRemovedWithDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	require.NoError(t, os.Mkdir(dir, 0o700))
	s := NewSpool(dir, 0, 0)
	_, err := s.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice is fine")
}

// A process that dies while an upload is spooled (killed, out of memory, a
// power cut) leaves no copy of the caller's audio in the spool directory:
// the temporary file has no name once it is open.
func TestAudioSpoolLeavesNothingWhenTheProcessDies(t *testing.T) {
	if dir := os.Getenv("SWITCHBOARD_SPOOL_DIES_IN"); dir != "" {
		s := NewSpool(dir, 16, 0)
		if _, err := s.Write(bytes.Repeat([]byte("speech"), 100)); err != nil || !s.Spilled() {
			os.Exit(2)
		}
		if got, err := io.ReadAll(s.Reader()); err != nil || len(got) != 600 {
			os.Exit(2)
		}
		os.Exit(3) // dies mid-upload: Close never runs
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAudioSpoolLeavesNothingWhenTheProcessDies$")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_SPOOL_DIES_IN="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 3, exit.ExitCode(), "the upload was spooled to a file: %s", out)
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, files, "no file of the dead process's upload is left")
}

// A speech asked for as server-sent events (stream_format sse, OpenAI's
// speech.audio.delta events) from an ElevenLabs voice, which speaks only
// audio, is refused with a 400 the client reads, where the raw audio was
// answered to a client reading events from it; stream_format is one of
// OpenAI's two values.
func TestAudioSpeechStreamFormat(t *testing.T) {
	req, err := ParseSpeech([]byte(`{"model":"elevenlabs/eleven_v3:ash","input":"hi","stream_format":"sse"}`))
	require.NoError(t, err)
	_, err = elevenLabsSpeech(context.Background(), routing.Target{Model: "eleven_v3"}, &dispatch.Conn{BaseURL: "http://el/v1"}, req)
	var up *credential.UpstreamError
	require.ErrorAs(t, err, &up, "an answer the client gets, not a connection failure")
	assert.Equal(t, 400, up.Status)
	assert.Contains(t, string(up.Body), `"param":"stream_format"`)

	req, err = ParseSpeech([]byte(`{"model":"elevenlabs/eleven_v3:ash","input":"hi","stream_format":"audio"}`))
	require.NoError(t, err)
	_, err = elevenLabsSpeech(context.Background(), routing.Target{Model: "eleven_v3"}, &dispatch.Conn{BaseURL: "http://el/v1"}, req)
	require.NoError(t, err)

	for _, body := range []string{
		`{"model":"m","input":"x","voice":"a","stream_format":"mp3"}`,
		`{"model":"m","input":"x","voice":"a","stream_format":true}`,
	} {
		_, err := ParseSpeech([]byte(body))
		var inv *InvalidError
		require.ErrorAs(t, err, &inv, body)
		assert.Equal(t, "stream_format", inv.Param, body)
	}
}
