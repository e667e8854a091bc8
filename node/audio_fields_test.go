package node_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The form fields a transcription may carry besides those the gateway
// reads reach an OpenAI-style upstream as the official client wrote them:
// gpt-4o-transcribe-diarize's chunking_strategy (which OpenAI requires past
// 30 s of audio), its known speakers and its diarized_json format, and the
// logprobs include[] of the other gpt-4o models. Before, they were dropped
// (diarized_json refused with a 400), so a diarization past 30 s failed
// upstream for want of a field the client had sent.
func TestAudioTranscriptionFormFieldsReachTheUpstream(t *testing.T) {
	var mu sync.Mutex
	var forms []map[string][]string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(8 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		forms = append(forms, r.MultipartForm.Value)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.FormValue("response_format") == "diarized_json" {
			_, _ = w.Write([]byte(`{"task":"transcribe","duration":1.5,"text":"hello there","segments":[{"type":"transcript.text.segment","id":"seg_0","start":0,"end":1.5,"text":"hello there","speaker":"agent"}],"usage":{"type":"tokens","input_tokens":14,"output_tokens":3,"total_tokens":17}}`))
			return
		}
		_, _ = w.Write([]byte(`{"text":"hello there","logprobs":[{"token":"hello","logprob":-0.1,"bytes":[104]}],"usage":{"type":"tokens","input_tokens":14,"output_tokens":3,"total_tokens":17}}`))
	}))
	t.Cleanup(up.Close)
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-up",
		"providerSpecificData": map[string]any{"baseUrl": up.URL}})
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "audio"}).JSON["key"].(string)
	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	audio := wav(1.5)
	ctx := context.Background()

	resp, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
		File:                   openai.File(bytes.NewReader(audio), "call.wav", "audio/wav"),
		Model:                  "openai/gpt-4o-transcribe-diarize",
		ResponseFormat:         openai.AudioResponseFormatDiarizedJSON,
		ChunkingStrategy:       openai.AudioTranscriptionNewParamsChunkingStrategyUnion{OfAuto: "auto"},
		KnownSpeakerNames:      []string{"agent", "customer"},
		KnownSpeakerReferences: []string{"data:audio/wav;base64,AAAA", "data:audio/wav;base64,BBBB"},
	})
	require.NoError(t, err)
	assert.Equal(t, "hello there", resp.Text)
	require.Len(t, forms, 1)
	f := forms[0]
	assert.Equal(t, []string{"gpt-4o-transcribe-diarize"}, f["model"])
	assert.Equal(t, []string{"diarized_json"}, f["response_format"])
	assert.Equal(t, []string{"auto"}, f["chunking_strategy"])
	assert.Equal(t, []string{"agent", "customer"}, f["known_speaker_names[]"])
	assert.Equal(t, []string{"data:audio/wav;base64,AAAA", "data:audio/wav;base64,BBBB"}, f["known_speaker_references[]"])

	// A VAD configuration, an object, goes as the client's bracketed fields.
	_, err = client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
		File:  openai.File(bytes.NewReader(audio), "call.wav", "audio/wav"),
		Model: "openai/gpt-4o-transcribe-diarize",
		ChunkingStrategy: openai.AudioTranscriptionNewParamsChunkingStrategyUnion{OfAudioTranscriptionNewsChunkingStrategyVadConfig: &openai.AudioTranscriptionNewParamsChunkingStrategyVadConfig{
			Type: "server_vad", SilenceDurationMs: param.NewOpt[int64](300)}},
	})
	require.NoError(t, err)
	require.Len(t, forms, 2)
	assert.Equal(t, []string{"server_vad"}, forms[1]["chunking_strategy[type]"])
	assert.Equal(t, []string{"300"}, forms[1]["chunking_strategy[silence_duration_ms]"])

	resp, err = client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
		File:    openai.File(bytes.NewReader(audio), "call.wav", "audio/wav"),
		Model:   "openai/gpt-4o-transcribe",
		Include: []openai.TranscriptionInclude{openai.TranscriptionIncludeLogprobs},
	})
	require.NoError(t, err)
	require.Len(t, forms, 3)
	assert.Equal(t, []string{"logprobs"}, forms[2]["include[]"])
	require.Len(t, resp.Logprobs, 1, "the upstream's logprobs reach the client")
}
