package node_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

const (
	pathTranscriptions = "/v1/audio/transcriptions"
	pathSpeech         = "/v1/audio/speech"
	sttModel           = "openai/whisper-1"
	voiceModel         = "openai/gpt-4o-mini-tts:alloy"
)

// wav returns a real WAV file: 16 kHz mono 16-bit PCM, a 440 Hz tone of
// the given length.
func wav(seconds float64) []byte {
	const rate = 16000
	n := int(seconds * rate)
	b := make([]byte, 44, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+2*n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], rate)
	binary.LittleEndian.PutUint32(b[28:], 2*rate)
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(2*n))
	for i := range n {
		v := int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate))
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	return b
}

// audioGateway is a serve instance with OpenAI connections to fake
// upstreams, in priority order, and an API key.
type audioGateway struct {
	sb  *nodetest.Instance
	ups []*upstreamtest.Server
	ids []string
	key string
}

func newAudioGateway(t *testing.T, n int) audioGateway {
	t.Helper()
	g := audioGateway{sb: nodetest.Serve(t, t.TempDir())}
	for i := range n {
		key := "sk-up-" + string(rune('a'+i))
		up := upstreamtest.New(t, upstreamtest.WithAPIKey(key))
		g.ups = append(g.ups, up)
		g.ids = append(g.ids, g.sb.CreateConnection(t, map[string]any{"provider": "openai", "name": key, "apiKey": key, "priority": i + 1,
			"providerSpecificData": map[string]any{"baseUrl": up.URL()}}))
	}
	k := g.sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "audio"})
	require.Equal(t, http.StatusCreated, k.Status, "%s", k.Body)
	g.key = k.JSON["key"].(string)
	return g
}

func (g audioGateway) client() *openai.Client {
	c := openai.NewClient(option.WithBaseURL(g.sb.BaseURL+"/v1"), option.WithAPIKey(g.key), option.WithMaxRetries(0))
	return &c
}

// upload posts a multipart form: the file part (when audio is not nil),
// then the fields.
func (g audioGateway) upload(t *testing.T, audio []byte, fields ...string) nodetest.Response {
	t.Helper()
	ct, body := multipartForm(t, audio, fields...)
	return g.sb.Do(t, http.MethodPost, pathTranscriptions, string(body), "Content-Type", ct, "Authorization", "Bearer "+g.key)
}

func multipartForm(t *testing.T, audio []byte, fields ...string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if audio != nil {
		w, err := mw.CreateFormFile("file", "speech.wav")
		require.NoError(t, err)
		_, err = w.Write(audio)
		require.NoError(t, err)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		require.NoError(t, mw.WriteField(fields[i], fields[i+1]))
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

// fieldsOf parses the multipart body an upstream received.
func fieldsOf(t *testing.T, r upstreamtest.Request) map[string][]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(r.Body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	require.NoError(t, req.ParseMultipartForm(64<<20))
	return req.MultipartForm.Value
}

func lastRequest(t *testing.T, up *upstreamtest.Server, path string) upstreamtest.Request {
	t.Helper()
	var last *upstreamtest.Request
	for _, r := range up.Requests() {
		if r.Path == path {
			last = &r
		}
	}
	require.NotNil(t, last, "no request on %s", path)
	return *last
}

func TestAudioTranscriptionWithOfficialGoClient(t *testing.T) {
	g := newAudioGateway(t, 1)
	audio := wav(1.5)
	resp, err := g.client().Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File:                   openai.File(bytes.NewReader(audio), "hello.wav", "audio/wav"),
		Model:                  sttModel,
		Language:               openai.String("en"),
		Prompt:                 openai.String("a greeting"),
		Temperature:            openai.Float(0.2),
		ResponseFormat:         openai.AudioResponseFormatVerboseJSON,
		TimestampGranularities: []string{"segment"},
	})
	require.NoError(t, err)
	assert.Equal(t, upstreamtest.Transcript(audio), resp.Text)
	assert.Equal(t, "en", resp.Language)
	assert.Positive(t, resp.Duration)

	got := lastRequest(t, g.ups[0], pathTranscriptions)
	assert.Equal(t, audio, got.File, "the file reaches the upstream byte for byte")
	assert.Equal(t, "hello.wav", got.FileName)
	assert.Equal(t, "Bearer sk-up-a", got.Header.Get("Authorization"))
	f := fieldsOf(t, got)
	assert.Equal(t, []string{"whisper-1"}, f["model"], "the upstream model id")
	assert.Equal(t, []string{"en"}, f["language"])
	assert.Equal(t, []string{"a greeting"}, f["prompt"])
	assert.Equal(t, []string{"0.2"}, f["temperature"])
	assert.Equal(t, []string{"verbose_json"}, f["response_format"])
	assert.Equal(t, []string{"segment"}, f["timestamp_granularities[]"])

	// Usage: the duration the upstream reported.
	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, "audio.transcriptions", evs[0].GetEndpoint())
	assert.Equal(t, "whisper-1", evs[0].GetModel())
	assert.Equal(t, g.ids[0], evs[0].GetConnectionId())
	assert.Equal(t, resp.Duration, evs[0].GetAudioSeconds())
	assert.EqualValues(t, 200, evs[0].GetStatus())

	// Errors arrive as the SDK's typed errors.
	_, err = g.client().Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: openai.File(bytes.NewReader(audio), "a.wav", "audio/wav"), Model: "acme/nope",
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Equal(t, "model_not_found", apiErr.Code)
}

// A file name in another encoding than UTF-8 is mended, not a 500 an SDK
// would retry.
func TestAudioTranscriptionOddRequests(t *testing.T) {
	g := newAudioGateway(t, 1)
	audio := wav(0.5)
	resp, err := g.client().Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: openai.File(bytes.NewReader(audio), "caf\xe9.wav", "audio/wav"), Model: sttModel,
	})
	require.NoError(t, err)
	assert.Equal(t, upstreamtest.Transcript(audio), resp.Text)
	assert.Equal(t, "caf\uFFFD.wav", lastRequest(t, g.ups[0], pathTranscriptions).FileName)
}

// direct sends the form of fields to the first upstream directly, and
// answers its body and content type: what the gateway should pass on.
func (g audioGateway) direct(t *testing.T, audio []byte, fields ...string) (body, contentType string) {
	t.Helper()
	ct, form := multipartForm(t, audio, fields...)
	req, err := http.NewRequest(http.MethodPost, g.ups[0].URL()+"/audio/transcriptions", bytes.NewReader(form))
	require.NoError(t, err)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "Bearer sk-up-a")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(raw), resp.Header.Get("Content-Type")
}

// Every response format comes back as the upstream sent it, content type
// included.
func TestAudioTranscriptionFormats(t *testing.T) {
	g := newAudioGateway(t, 1)
	audio := wav(0.5)
	for _, format := range []string{"", "json", "text", "srt", "verbose_json", "vtt"} {
		t.Run("format "+format, func(t *testing.T) {
			fields := []string{"model", sttModel}
			direct := []string{"model", "whisper-1"}
			if format != "" {
				fields = append(fields, "response_format", format)
				direct = append(direct, "response_format", format)
			}
			r := g.upload(t, audio, fields...)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

			want, ctype := g.direct(t, audio, direct...)
			assert.Equal(t, want, string(r.Body))
			assert.Equal(t, ctype, r.Header.Get("Content-Type"))
			assert.Contains(t, string(r.Body), "Transcribed "+strconv.Itoa(len(audio))+" bytes")
		})
	}
	// Usage: the duration each format tells (subtitles by their last cue,
	// plain text by the verbose_json asked for in its place), so that no
	// format escapes metering.
	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 6 }, 5*time.Second, 20*time.Millisecond)
	timed := 0
	for _, ev := range evs {
		if ev.GetAudioSeconds() > 0 {
			timed++
		}
	}
	assert.Equal(t, 6, timed, "every format reports its duration")
}

// A 429 mid-way through the connections: the next one gets the same upload,
// byte for byte, read again from the spool (here larger than its memory part,
// so from a temporary file).
func TestAudioTranscriptionFallbackResendsTheUpload(t *testing.T) {
	g := newAudioGateway(t, 3)
	g.ups[0].Enqueue(upstreamtest.PathTranscriptions, upstreamtest.RateLimited(""))
	g.ups[1].Enqueue(upstreamtest.PathTranscriptions, upstreamtest.RateLimited("3"))
	audio := wav(40) // 1.28 MB: past the spool's memory part
	r := g.upload(t, audio, "model", sttModel, "language", "de")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, upstreamtest.Transcript(audio), r.JSON["text"])
	for i, up := range g.ups {
		require.Equal(t, 1, up.Count(upstreamtest.PathTranscriptions), "upstream %d", i)
		got := lastRequest(t, up, pathTranscriptions)
		assert.True(t, bytes.Equal(audio, got.File), "upstream %d got the upload intact (%d bytes of %d)", i, len(got.File), len(audio))
		assert.Equal(t, []string{"de"}, fieldsOf(t, got)["language"], "upstream %d", i)
		assert.Equal(t, []string{"whisper-1"}, fieldsOf(t, got)["model"], "upstream %d", i)
	}
	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, g.ids[2], evs[0].GetConnectionId())
	assert.EqualValues(t, 3, evs[0].GetAttempts())

	// Every connection rate limited: 429 with Retry-After.
	for _, up := range g.ups {
		up.SetDefault(upstreamtest.PathTranscriptions, upstreamtest.RateLimited("5"))
	}
	r = g.upload(t, audio, "model", sttModel)
	require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
	assert.Equal(t, "rate_limit_exceeded", errorCode(r))
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
}

func TestAudioTranscriptionSizeLimit(t *testing.T) {
	cfg := nodetest.Config(t.TempDir())
	cfg.MaxAudioBytes = 100_000
	sb := nodetest.Start(t, cfg, node.AllRoles...)
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "k"})
	require.Equal(t, http.StatusCreated, key.Status, "%s", key.Body)
	g := audioGateway{sb: sb, ups: []*upstreamtest.Server{up}, key: key.JSON["key"].(string)}

	r := g.upload(t, wav(4), "model", sttModel) // 128 kB
	require.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "%s", r.Body)
	assert.Equal(t, "request_too_large", errorCode(r))
	assert.Equal(t, "invalid_request_error", errorType(r))
	assert.Zero(t, up.Count(upstreamtest.PathTranscriptions), "nothing is sent upstream")

	// The official client sees a typed 413 too.
	_, err := g.client().Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{
		File: openai.File(bytes.NewReader(wav(4)), "big.wav", "audio/wav"), Model: sttModel,
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusRequestEntityTooLarge, apiErr.StatusCode)
	assert.Zero(t, up.Count(upstreamtest.PathTranscriptions))

	// Under the limit goes through.
	r = g.upload(t, wav(3), "model", sttModel) // 96 kB
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, 1, up.Count(upstreamtest.PathTranscriptions))
}

func TestAudioTranscriptionErrors(t *testing.T) {
	g := newAudioGateway(t, 1)
	audio := wav(0.2)
	for _, tc := range []struct {
		name   string
		do     func() nodetest.Response
		status int
		code   string
	}{
		{"missing model", func() nodetest.Response { return g.upload(t, audio) }, 400, "missing_required_parameter"},
		{"missing file", func() nodetest.Response { return g.upload(t, nil, "model", sttModel) }, 400, "missing_required_parameter"},
		{"empty file", func() nodetest.Response { return g.upload(t, []byte{}, "model", sttModel) }, 400, "invalid_value"},
		{"JSON body", func() nodetest.Response {
			return g.sb.Do(t, http.MethodPost, pathTranscriptions, map[string]any{"model": sttModel}, "Authorization", "Bearer "+g.key)
		}, 415, "invalid_content_type"},
		{"bad response_format", func() nodetest.Response { return g.upload(t, audio, "model", sttModel, "response_format", "mp3") }, 400, "invalid_value"},
		{"unknown model", func() nodetest.Response { return g.upload(t, audio, "model", "acme/whisper") }, 400, "model_not_found"},
		{"provider without a connection", func() nodetest.Response { return g.upload(t, audio, "model", "groq/whisper-large-v3") }, 400, "no_credentials"},
		{"bad key", func() nodetest.Response {
			ct, body := multipartForm(t, audio, "model", sttModel)
			return g.sb.Do(t, http.MethodPost, pathTranscriptions, string(body), "Content-Type", ct, "Authorization", "Bearer sk-nope")
		}, 401, "invalid_api_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.do()
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			assert.Equal(t, tc.code, errorCode(r), "%s", r.Body)
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		})
	}
	assert.Zero(t, g.ups[0].Count(upstreamtest.PathTranscriptions))

	t.Run("upstream 400 passed through, no fallback", func(t *testing.T) {
		g := newAudioGateway(t, 2)
		g.ups[0].Enqueue(upstreamtest.PathTranscriptions, upstreamtest.OpenAIError(400, "invalid_request_error", "invalid_value", "Audio file might be corrupted or unsupported"))
		r := g.upload(t, audio, "model", sttModel)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		assert.Equal(t, "Audio file might be corrupted or unsupported", r.JSON["error"].(map[string]any)["message"])
		assert.Zero(t, g.ups[1].Count(upstreamtest.PathTranscriptions))
	})
}

func TestAudioSpeechWithOfficialGoClient(t *testing.T) {
	g := newAudioGateway(t, 2)
	const input = "Hello from the gateway."
	for _, format := range []struct {
		format      openai.AudioSpeechNewParamsResponseFormat
		contentType string
	}{
		{openai.AudioSpeechNewParamsResponseFormatWAV, "audio/wav"},
		{openai.AudioSpeechNewParamsResponseFormatPCM, "audio/pcm"},
		{openai.AudioSpeechNewParamsResponseFormatMP3, "audio/mpeg"},
		{openai.AudioSpeechNewParamsResponseFormatFLAC, "audio/flac"},
	} {
		t.Run(string(format.format), func(t *testing.T) {
			resp, err := g.client().Audio.Speech.New(context.Background(), openai.AudioSpeechNewParams{
				Model: "openai/tts-1", Input: input, Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("nova")},
				ResponseFormat: format.format, Speed: openai.Float(1.25),
			})
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, format.contentType, resp.Header.Get("Content-Type"))
			assert.Equal(t, upstreamtest.SpeechAudio(input, string(format.format)), body)

			var sent map[string]any
			require.NoError(t, json.Unmarshal(lastRequest(t, g.ups[0], pathSpeech).Body, &sent))
			assert.Equal(t, "tts-1", sent["model"])
			assert.Equal(t, "nova", sent["voice"])
			assert.Equal(t, input, sent["input"])
			assert.Equal(t, 1.25, sent["speed"])
		})
	}

	t.Run("a voice's model, no voice", func(t *testing.T) {
		r := g.sb.Do(t, http.MethodPost, pathSpeech, map[string]any{"model": voiceModel, "input": input, "response_format": "wav"},
			"Authorization", "Bearer "+g.key)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, upstreamtest.SpeechAudio(input, "wav"), r.Body)
		var sent map[string]any
		require.NoError(t, json.Unmarshal(lastRequest(t, g.ups[0], pathSpeech).Body, &sent))
		assert.Equal(t, "gpt-4o-mini-tts", sent["model"])
		assert.Equal(t, "alloy", sent["voice"])
	})

	t.Run("fallback before the first byte", func(t *testing.T) {
		g.ups[0].Enqueue(upstreamtest.PathSpeech, upstreamtest.RateLimited("1"))
		before := g.ups[1].Count(upstreamtest.PathSpeech)
		r := g.sb.Do(t, http.MethodPost, pathSpeech, map[string]any{"model": voiceModel, "input": "fallback", "response_format": "wav"},
			"Authorization", "Bearer "+g.key)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, upstreamtest.SpeechAudio("fallback", "wav"), r.Body)
		assert.Equal(t, before+1, g.ups[1].Count(upstreamtest.PathSpeech))
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			body  map[string]any
			code  string
			param string
		}{
			{map[string]any{"input": "x", "voice": "alloy"}, "missing_required_parameter", "model"},
			{map[string]any{"model": "openai/tts-1", "voice": "alloy"}, "missing_required_parameter", "input"},
			{map[string]any{"model": "openai/tts-1", "input": "x"}, "missing_required_parameter", "voice"},
			{map[string]any{"model": "openai/tts-1", "input": "x", "voice": "alloy", "response_format": "ogg"}, "invalid_value", "response_format"},
			{map[string]any{"model": "acme/tts", "input": "x", "voice": "alloy"}, "model_not_found", "model"},
		} {
			r := g.sb.Do(t, http.MethodPost, pathSpeech, tc.body, "Authorization", "Bearer "+g.key)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", tc.body, r.Body)
			assert.Equal(t, tc.code, errorCode(r), "%v", tc.body)
			assert.Equal(t, tc.param, r.JSON["error"].(map[string]any)["param"], "%v", tc.body)
		}
	})

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool {
		evs = usageEvents(t, g.sb)
		for _, ev := range evs {
			if ev.GetEndpoint() == "audio.speech" && ev.GetStatus() == 200 && ev.GetCharacters() == int64(len(input)) {
				return true
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "speech usage counts the input characters")
}

// A stream cut after its first bytes is not retried elsewhere: the client
// sees a truncated response.
func TestAudioSpeechCutMidStream(t *testing.T) {
	g := newAudioGateway(t, 2)
	g.ups[0].SetDefault(upstreamtest.PathSpeech, upstreamtest.CutAfter(2))
	req, err := http.NewRequest(http.MethodPost, g.sb.BaseURL+pathSpeech,
		strings.NewReader(`{"model":"`+voiceModel+`","input":"`+strings.Repeat("a long input ", 10)+`","response_format":"wav"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+g.key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.ReadAll(resp.Body)
	assert.Error(t, err, "the client sees the cut")
	assert.Zero(t, g.ups[1].Count(upstreamtest.PathSpeech), "no fallback after the first byte")

	// The upstream made that audio from the whole input: billed as partial.
	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, "audio.speech", evs[0].GetEndpoint())
	assert.EqualValues(t, len(strings.Repeat("a long input ", 10)), evs[0].GetCharacters())
	assert.True(t, evs[0].GetPartial(), "cut off")
}

// A speech a gRPC caller was getting that the upstream cuts off ends with
// UNAVAILABLE stream_interrupted, as a chat stream cut off does, recorded
// as that 502, not as an internal error of the gateway.
func TestAudioSpeechCutMidStreamOverGRPC(t *testing.T) {
	g := newAudioGateway(t, 2)
	g.ups[0].SetDefault(upstreamtest.PathSpeech, upstreamtest.CutAfter(2))
	conn, err := grpc.NewClient(g.sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+g.key)
	sp, err := corev1.NewRouterClient(conn).Speech(ctx, &corev1.SpeechRequest{
		Body: []byte(`{"model":"` + voiceModel + `","input":"` + strings.Repeat("a long input ", 10) + `","response_format":"wav"}`)})
	require.NoError(t, err)
	var got int
	for {
		m, err := sp.Recv()
		if err != nil {
			require.NotErrorIs(t, err, io.EOF, "a cut is never a clean end")
			assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
			assert.Equal(t, "stream_interrupted", errorInfoOf(err).GetReason())
			break
		}
		got += len(m.GetAudio())
	}
	assert.Positive(t, got, "audio came before the cut")
	assert.Zero(t, g.ups[1].Count(upstreamtest.PathSpeech), "no fallback after the first byte")

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.EqualValues(t, http.StatusBadGateway, evs[0].GetStatus())
	assert.Equal(t, "stream_interrupted", evs[0].GetErrorCode())
	assert.True(t, evs[0].GetPartial(), "cut off")
}

// fakeElevenLabs is a fake ElevenLabs API: GET /v1/voices and
// POST /v1/text-to-speech/{voice}/stream, with xi-api-key.
type fakeElevenLabs struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

const elevenKey = "xi-test-key"

func newFakeElevenLabs(t *testing.T) *fakeElevenLabs {
	f := &fakeElevenLabs{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/voices", func(w http.ResponseWriter, r *http.Request) {
		if !f.auth(w, r, nil) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"voices":[
			{"voice_id":"21m00Tcm4TlvDq8ikWAM","name":"Rachel","labels":{"gender":"female","accent":"american"},"verified_languages":[{"language":"en","model_id":"eleven_multilingual_v2"}]},
			{"voice_id":"XrExE9yKIg1WjnnlVkGX","name":"Matilda","labels":{"gender":"female","language":"de"}},
			{"voice_id":"pNInz6obpgDQGcFmaJgB","name":"Adam","labels":{"gender":"male"},"fine_tuning":{"language":"en"}}
		]}`)
	})
	mux.HandleFunc("POST /v1/text-to-speech/{voice}/stream", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !f.auth(w, r, body) {
			return
		}
		var req struct {
			Text    string `json:"text"`
			ModelID string `json:"model_id"`
		}
		if json.Unmarshal(body, &req) != nil || req.Text == "" || req.ModelID == "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Content-Type", "audio/mpeg")
		audio := upstreamtest.SpeechAudio(req.Text+r.PathValue("voice"), "mp3")
		for len(audio) > 0 {
			n := min(len(audio), 1000)
			_, _ = w.Write(audio[:n])
			w.(http.Flusher).Flush()
			audio = audio[n:]
		}
	})
	mux.HandleFunc("POST /v1/speech-to-text", func(w http.ResponseWriter, r *http.Request) {
		if !f.auth(w, r, nil) {
			return
		}
		file, _, err := r.FormFile("file")
		if err != nil || r.FormValue("model_id") == "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		audio, _ := io.ReadAll(file)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"language_code": r.FormValue("language_code"), "language_probability": 0.98,
			"text":  upstreamtest.Transcript(audio),
			"words": elevenLabsWords(upstreamtest.Transcript(audio)),
		})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// ElevenLabs' own speech-to-text answer is normalised to {"text": ...}.
func TestAudioTranscriptionElevenLabs(t *testing.T) {
	g := newAudioGateway(t, 0)
	el := newFakeElevenLabs(t)
	g.sb.CreateConnection(t, map[string]any{"provider": "elevenlabs", "name": "el", "apiKey": elevenKey,
		"providerSpecificData": map[string]any{"baseUrl": el.srv.URL + "/v1"}})
	audio := wav(0.3)
	r := g.upload(t, audio, "model", "elevenlabs/scribe_v1", "language", "en")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.JSONEq(t, `{"text":"`+upstreamtest.Transcript(audio)+`"}`, string(r.Body))
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	el.mu.Lock()
	last := el.reqs[len(el.reqs)-1]
	el.mu.Unlock()
	assert.Equal(t, "en", last.FormValue("language_code"))
	assert.Equal(t, "scribe_v1", last.FormValue("model_id"))

	r = g.upload(t, audio, "model", "elevenlabs/scribe_v1", "response_format", "text")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, upstreamtest.Transcript(audio)+"\n", string(r.Body))
	assert.Equal(t, "text/plain; charset=utf-8", r.Header.Get("Content-Type"))

	var evs []*busv1.UsageEvent
	require.Eventually(t, func() bool { evs = usageEvents(t, g.sb); return len(evs) == 2 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, 3.4, evs[0].GetAudioSeconds(), "the end of the last word")
	assert.Equal(t, "elevenlabs", evs[0].GetProvider())
}

func (f *fakeElevenLabs) auth(w http.ResponseWriter, r *http.Request, body []byte) bool {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.body = append(f.body, body)
	f.mu.Unlock()
	if r.Header.Get("xi-api-key") != elevenKey {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"detail":{"status":"invalid_api_key","message":"Invalid API key"}}`)
		return false
	}
	return true
}

type voicesList struct {
	Object string `json:"object"`
	Data   []struct {
		ID, Name, Lang, Gender, Model string
	} `json:"data"`
}

func TestAudioVoicesAndSpeech(t *testing.T) {
	g := newAudioGateway(t, 1)
	voices := func(t *testing.T, query string) (nodetest.Response, voicesList) {
		t.Helper()
		r := g.sb.Do(t, http.MethodGet, "/v1/audio/voices"+query, nil, "Authorization", "Bearer "+g.key)
		var v voicesList
		_ = json.Unmarshal(r.Body, &v)
		return r, v
	}

	t.Run("openai: the fixed list, each model usable for speech", func(t *testing.T) {
		r, v := voices(t, "?provider=openai")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "list", v.Object)
		models := map[string]string{}
		for _, x := range v.Data {
			models[x.ID] = x.Model
			assert.NotEmpty(t, x.Name)
			assert.NotEmpty(t, x.Gender)
			assert.NotEmpty(t, x.Lang)
		}
		for _, id := range []string{"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse"} {
			assert.Contains(t, models, id)
		}
		resp, err := g.client().Audio.Speech.New(context.Background(), openai.AudioSpeechNewParams{
			Model: models["coral"], Input: "voice test", ResponseFormat: openai.AudioSpeechNewParamsResponseFormatWAV,
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("coral")},
		})
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, upstreamtest.SpeechAudio("voice test", "wav"), body)
		var sent map[string]any
		require.NoError(t, json.Unmarshal(lastRequest(t, g.ups[0], pathSpeech).Body, &sent))
		assert.Equal(t, "coral", sent["voice"])

		r, v2 := voices(t, "?provider=openai&lang=de")
		require.Equal(t, http.StatusOK, r.Status)
		assert.Len(t, v2.Data, len(v.Data), "OpenAI voices speak every language")
	})

	t.Run("unsupported or missing provider: 400 naming the supported ones", func(t *testing.T) {
		for _, q := range []string{"?provider=groq", ""} {
			r, _ := voices(t, q)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			msg := r.JSON["error"].(map[string]any)["message"].(string)
			assert.Contains(t, msg, "openai")
			assert.Contains(t, msg, "elevenlabs")
			assert.Equal(t, "provider", r.JSON["error"].(map[string]any)["param"])
		}
	})

	t.Run("elevenlabs without a connection: 400 no_credentials", func(t *testing.T) {
		r, _ := voices(t, "?provider=elevenlabs")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		assert.Equal(t, "no_credentials", errorCode(r))
	})

	t.Run("elevenlabs: listed with the connection's key, speech streamed", func(t *testing.T) {
		el := newFakeElevenLabs(t)
		g.sb.CreateConnection(t, map[string]any{"provider": "elevenlabs", "name": "el", "apiKey": elevenKey,
			"providerSpecificData": map[string]any{"baseUrl": el.srv.URL + "/v1"}})
		r, v := voices(t, "?provider=elevenlabs")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Len(t, v.Data, 3)
		assert.Equal(t, "21m00Tcm4TlvDq8ikWAM", v.Data[0].ID)
		assert.Equal(t, "Rachel", v.Data[0].Name)
		assert.Equal(t, "en", v.Data[0].Lang)
		assert.Equal(t, "female", v.Data[0].Gender)
		assert.Equal(t, "elevenlabs/eleven_multilingual_v2:21m00Tcm4TlvDq8ikWAM", v.Data[0].Model)

		_, de := voices(t, "?provider=elevenlabs&lang=de")
		require.Len(t, de.Data, 1)
		assert.Equal(t, "Matilda", de.Data[0].Name)

		resp := g.sb.Do(t, http.MethodPost, pathSpeech, map[string]any{"model": v.Data[2].Model, "input": "Guten Tag", "speed": 1.1},
			"Authorization", "Bearer "+g.key)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		assert.Equal(t, "audio/mpeg", resp.Header.Get("Content-Type"))
		assert.Equal(t, upstreamtest.SpeechAudio("Guten Tag"+"pNInz6obpgDQGcFmaJgB", "mp3"), resp.Body)
		el.mu.Lock()
		last, lastBody := el.reqs[len(el.reqs)-1], el.body[len(el.body)-1]
		el.mu.Unlock()
		assert.Equal(t, "/v1/text-to-speech/pNInz6obpgDQGcFmaJgB/stream", last.URL.Path)
		assert.Equal(t, "mp3_44100_128", last.URL.Query().Get("output_format"))
		assert.Equal(t, elevenKey, last.Header.Get("xi-api-key"))
		assert.JSONEq(t, `{"text":"Guten Tag","model_id":"eleven_multilingual_v2","voice_settings":{"speed":1.1}}`, string(lastBody))
	})
}

// Internal callers reach the same routes over gRPC, with the same auth.
func TestAudioOverGRPC(t *testing.T) {
	g := newAudioGateway(t, 1)
	conn, err := grpc.NewClient(g.sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	router := corev1.NewRouterClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+g.key)

	audio := wav(0.8)
	stream, err := router.Transcribe(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&corev1.TranscribeRequest{Part: &corev1.TranscribeRequest_Options{Options: &corev1.TranscribeOptions{
		Model: sttModel, Filename: "a.wav", ContentType: "audio/wav", ResponseFormat: "text"}}}))
	for off := 0; off < len(audio); off += 4096 {
		require.NoError(t, stream.Send(&corev1.TranscribeRequest{Part: &corev1.TranscribeRequest_Audio{Audio: audio[off:min(off+4096, len(audio))]}}))
	}
	resp, err := stream.CloseAndRecv()
	require.NoError(t, err)
	assert.Equal(t, upstreamtest.Transcript(audio)+"\n", string(resp.GetBody()))
	assert.Equal(t, "text/plain; charset=utf-8", resp.GetContentType())
	got := lastRequest(t, g.ups[0], pathTranscriptions)
	assert.Equal(t, audio, got.File)
	assert.Equal(t, "a.wav", got.FileName)

	// A stream is StreamTranscription's: Transcribe refuses it before any
	// upstream is called.
	calls := g.ups[0].Count(pathTranscriptions)
	stream, err = router.Transcribe(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&corev1.TranscribeRequest{Part: &corev1.TranscribeRequest_Options{Options: &corev1.TranscribeOptions{
		Model: "openai/gpt-4o-transcribe", Filename: "a.wav", Stream: true}}}))
	require.NoError(t, stream.Send(&corev1.TranscribeRequest{Part: &corev1.TranscribeRequest_Audio{Audio: audio}}))
	_, err = stream.CloseAndRecv()
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Equal(t, calls, g.ups[0].Count(pathTranscriptions))

	st, err := router.StreamTranscription(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(&corev1.StreamTranscriptionRequest{Part: &corev1.StreamTranscriptionRequest_Audio{Audio: audio}}))
	require.NoError(t, st.Send(&corev1.StreamTranscriptionRequest{Part: &corev1.StreamTranscriptionRequest_Options{Options: &corev1.TranscribeOptions{
		Model: "openai/gpt-4o-transcribe", Filename: "a.wav", Stream: true}}}))
	require.NoError(t, st.CloseSend())
	var events []byte
	for i := 0; ; i++ {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if i == 0 {
			assert.Equal(t, "text/event-stream", m.GetContentType())
		}
		events = append(events, m.GetBody()...)
	}
	assert.Contains(t, string(events), `"type":"transcript.text.done","text":`+strconv.Quote(upstreamtest.Transcript(audio)))

	sp, err := router.Speech(ctx, &corev1.SpeechRequest{Body: []byte(`{"model":"` + voiceModel + `","input":"grpc speech","response_format":"pcm"}`)})
	require.NoError(t, err)
	var ct string
	var pcm []byte
	for {
		m, err := sp.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if m.GetContentType() != "" {
			ct = m.GetContentType()
		}
		pcm = append(pcm, m.GetAudio()...)
	}
	assert.Equal(t, "audio/pcm", ct)
	assert.Equal(t, upstreamtest.SpeechAudio("grpc speech", "pcm"), pcm)

	vs, err := router.ListVoices(ctx, &corev1.ListVoicesRequest{Provider: "openai"})
	require.NoError(t, err)
	assert.NotEmpty(t, vs.GetData())

	bad := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer sk-wrong")
	_, err = router.ListVoices(bad, &corev1.ListVoicesRequest{Provider: "openai"})
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	sp, err = router.Speech(bad, &corev1.SpeechRequest{Body: []byte(`{}`)})
	require.NoError(t, err)
	_, err = sp.Recv()
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	ts, err := router.Transcribe(bad)
	require.NoError(t, err)
	_, err = ts.CloseAndRecv()
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
}

// The official openai npm package uploads a WAV file from disk and reads
// speech back.
func TestAudioNPM(t *testing.T) {
	nodetest.NPM(t)
	g := newAudioGateway(t, 2)
	g.ups[0].Enqueue(upstreamtest.PathTranscriptions, upstreamtest.RateLimited(""))
	audio := wav(1)
	path := filepath.Join(t.TempDir(), "clip.wav")
	require.NoError(t, os.WriteFile(path, audio, 0o600))

	rs := g.sb.NPMClient(g.key).Ops(t, "audio.mjs",
		map[string]any{"op": "transcribe", "file": path, "params": map[string]any{"model": sttModel, "language": "en"}},
		map[string]any{"op": "transcribe", "file": path, "params": map[string]any{"model": sttModel, "response_format": "srt"}},
		map[string]any{"op": "speech", "params": map[string]any{"model": voiceModel, "input": "npm speech", "voice": "alloy", "response_format": "wav"}},
		map[string]any{"op": "transcribe", "file": path, "params": map[string]any{"model": "acme/none"}},
	)
	var tr struct {
		Text string `json:"text"`
	}
	rs[0].Decode(t, &tr)
	assert.Equal(t, upstreamtest.Transcript(audio), tr.Text)
	fallback := g.ups[1].Requests()[0]
	assert.True(t, bytes.Equal(audio, fallback.File), "the fallback got the file intact")
	assert.True(t, bytes.Equal(audio, g.ups[0].Requests()[0].File), "so did the rate-limited primary")
	assert.Equal(t, []string{"en"}, fieldsOf(t, fallback)["language"])
	assert.Equal(t, []string{"whisper-1"}, fieldsOf(t, fallback)["model"])

	var srt string
	rs[1].Decode(t, &srt)
	assert.True(t, strings.HasPrefix(srt, "1\n00:00:00,000 --> 00:00:02,000\n"), srt)

	var sp struct {
		ContentType string `json:"contentType"`
		Audio       []byte `json:"audio"` // base64
	}
	rs[2].Decode(t, &sp)
	assert.Equal(t, "audio/wav", sp.ContentType)
	assert.Equal(t, upstreamtest.SpeechAudio("npm speech", "wav"), sp.Audio)

	require.NotNil(t, rs[3].Error)
	assert.Equal(t, "BadRequestError", rs[3].Error.Class)
	assert.Equal(t, 400, rs[3].Error.Status)
	assert.Equal(t, "model_not_found", rs[3].Error.Code)
}

// OpenAI's voices are listed with the speech models a connection enables:
// tts-1's nine when only tts-1 is enabled, every one with gpt-4o-mini-tts,
// which speaks them all, and speech refuses a voice its model does not speak
// before any upstream is asked.
func TestAudioVoicesOfEnabledSpeechModels(t *testing.T) {
	tts1Voices := []string{"alloy", "ash", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer"}
	listed := func(t *testing.T, sb *nodetest.Instance) map[string]string {
		t.Helper()
		r := sb.Do(t, http.MethodGet, "/v1/audio/voices?provider=openai", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var v voicesList
		require.NoError(t, json.Unmarshal(r.Body, &v))
		models := map[string]string{}
		for _, x := range v.Data {
			models[x.ID] = x.Model
		}
		return models
	}
	serve := func(t *testing.T, enabled ...string) (*nodetest.Instance, *upstreamtest.Server) {
		sb := nodetest.Serve(t, t.TempDir())
		up := upstreamtest.New(t)
		sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "work", "apiKey": "sk-work",
			"providerSpecificData": map[string]any{"baseUrl": up.URL(), "enabledModels": enabled}})
		return sb, up
	}

	t.Run("tts-1 only: its voices, spoken by it", func(t *testing.T) {
		sb, up := serve(t, "tts-1")
		models := listed(t, sb)
		want := map[string]string{}
		for _, id := range tts1Voices {
			want[id] = "openai/tts-1:" + id
		}
		assert.Equal(t, want, models)

		r := sb.Do(t, http.MethodPost, pathSpeech, map[string]any{"model": models["onyx"], "input": "hi", "response_format": "wav"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var sent map[string]any
		require.NoError(t, json.Unmarshal(lastRequest(t, up, pathSpeech).Body, &sent))
		assert.Equal(t, "tts-1", sent["model"])
		assert.Equal(t, "onyx", sent["voice"])

		n := len(up.Requests())
		for _, body := range []map[string]any{
			{"model": "openai/tts-1", "input": "hi", "voice": "ballad"},
			{"model": "openai/tts-1:marin", "input": "hi"},
		} {
			r := sb.Do(t, http.MethodPost, pathSpeech, body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			e, _ := r.JSON["error"].(map[string]any)
			assert.Equal(t, "invalid_request_error", e["type"], "%s", r.Body)
			assert.Equal(t, "invalid_value", e["code"])
			assert.Equal(t, "voice", e["param"])
			assert.Contains(t, e["message"], "tts-1")
			assert.Contains(t, e["message"], "alloy")
		}
		assert.Len(t, up.Requests(), n, "no upstream was asked")
	})

	t.Run("tts-1-hd only: its voices", func(t *testing.T) {
		sb, _ := serve(t, "tts-1-hd")
		models := listed(t, sb)
		assert.Len(t, models, len(tts1Voices))
		assert.Equal(t, "openai/tts-1-hd:alloy", models["alloy"])
		assert.NotContains(t, models, "verse")
	})

	t.Run("gpt-4o-mini-tts beside tts-1: every voice, spoken by gpt-4o-mini-tts", func(t *testing.T) {
		sb, _ := serve(t, "tts-1", "gpt-4o-mini-tts")
		models := listed(t, sb)
		assert.Len(t, models, 13)
		assert.Equal(t, "openai/gpt-4o-mini-tts:ballad", models["ballad"])
		assert.Equal(t, "openai/gpt-4o-mini-tts:alloy", models["alloy"])
	})
}
