package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// stallBound bounds every call of these tests: far above the test
// instance's first-byte and stall timeouts (2 s each), far below the
// suite's own timeout, so a silent upstream that hangs the gateway fails
// the test instead of hanging it.
const stallBound = 15 * time.Second

// stallPost posts body (JSON) to the instance within stallBound and reads
// the answer; err is the client's error (a failed call or a cut body).
func stallPost(t *testing.T, sb *nodetest.Instance, path string, body any, headers ...string) (status int, raw []byte, err error) {
	t.Helper()
	b, merr := json.Marshal(body)
	require.NoError(t, merr)
	ctx, cancel := context.WithTimeout(context.Background(), stallBound)
	defer cancel()
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, sb.BaseURL+path, bytes.NewReader(b))
	require.NoError(t, rerr)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	require.NoError(t, ctx.Err(), "the gateway answered within %s", stallBound)
	return resp.StatusCode, raw, err
}

// A whole (non-streamed) answer whose upstream sends its headers and then
// nothing gives way to the next connection after the stall timeout, in each
// chat dialect; the silent connection is cooled, so the next request goes
// straight to the fallback.
func TestChatWholeStallFallsOver(t *testing.T) {
	for _, tc := range []struct {
		name, path, upstream string
		body                 map[string]any
	}{
		{"chat completions", pathChat, pathChat,
			map[string]any{"model": chatModel, "messages": []map[string]any{{"role": "user", "content": "still there?"}}}},
		{"messages", pathMessages, pathChat, messagesBody(chatModel, "still there?", false)},
		{"responses", pathResponses, pathResponses, map[string]any{"model": chatModel, "input": "still there?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			key := gatewayKey(t, p.sb)
			p.primary.Enqueue(tc.upstream, upstreamtest.StallAfter(0))
			start := time.Now()
			status, raw, err := stallPost(t, p.sb, tc.path, tc.body, "Authorization", "Bearer "+key)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status, "%s", raw)
			assert.Contains(t, string(raw), "echo: still there?")
			assert.Greater(t, time.Since(start), p.sb.Config.StallTimeout/2, "the primary was waited on")
			assert.Equal(t, 1, p.primary.Count(tc.upstream))
			assert.Equal(t, 1, p.fallback.Count(tc.upstream), "the fallback answered")

			status, raw, err = stallPost(t, p.sb, tc.path, tc.body, "Authorization", "Bearer "+key)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status, "%s", raw)
			assert.Equal(t, 1, p.primary.Count(tc.upstream), "the silent primary is cooling")
			assert.Equal(t, 2, p.fallback.Count(tc.upstream))
		})
	}
}

// An embeddings answer that stalls after its headers gives way to the next
// connection, and the silent one is cooled.
func TestEmbeddingsStallFallsOver(t *testing.T) {
	p := newPair(t)
	p.primary.Enqueue(pathEmbed, upstreamtest.StallAfter(0))
	body := map[string]any{"model": embedModel, "input": "hello"}
	status, raw, err := stallPost(t, p.sb, pathEmbed, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var got struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Len(t, got.Data, 1)
	assert.InDeltaSlice(t, expected("hello"), got.Data[0].Embedding, 1e-6)
	assert.Equal(t, 1, p.primary.Count(pathEmbed))
	assert.Equal(t, 1, p.fallback.Count(pathEmbed), "the fallback answered")

	status, _, err = stallPost(t, p.sb, pathEmbed, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, 1, p.primary.Count(pathEmbed), "the silent primary is cooling")
	assert.Equal(t, 2, p.fallback.Count(pathEmbed))
}

// Speech that stalls before its first audio byte gives way to the next
// connection; speech that stalls mid-audio, after bytes reached the client,
// has no fallback: the response is cut off instead of hanging.
func TestAudioSpeechStall(t *testing.T) {
	input := strings.Repeat("a long input ", 10)
	body := map[string]any{"model": voiceModel, "input": input, "response_format": "wav"}
	t.Run("before the first byte", func(t *testing.T) {
		g := newAudioGateway(t, 2)
		g.ups[0].Enqueue(upstreamtest.PathSpeech, upstreamtest.StallAfter(0))
		status, raw, err := stallPost(t, g.sb, pathSpeech, body, "Authorization", "Bearer "+g.key)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		assert.Equal(t, upstreamtest.SpeechAudio(input, "wav"), raw)
		assert.Equal(t, 1, g.ups[0].Count(upstreamtest.PathSpeech))
		assert.Equal(t, 1, g.ups[1].Count(upstreamtest.PathSpeech), "the fallback answered")
	})
	t.Run("mid-audio", func(t *testing.T) {
		g := newAudioGateway(t, 2)
		g.ups[0].Enqueue(upstreamtest.PathSpeech, upstreamtest.StallAfter(2))
		status, raw, err := stallPost(t, g.sb, pathSpeech, body, "Authorization", "Bearer "+g.key)
		require.Equal(t, http.StatusOK, status)
		require.Error(t, err, "the client sees the cut")
		full := upstreamtest.SpeechAudio(input, "wav")
		assert.NotEmpty(t, raw)
		assert.Less(t, len(raw), len(full))
		assert.True(t, bytes.HasPrefix(full, raw), "what arrived is the start of the audio")
		assert.Zero(t, g.ups[1].Count(upstreamtest.PathSpeech), "no fallback after the first byte")
	})
}

// A transcription that stalls after its headers gives way to the next
// connection, which gets the upload again.
func TestAudioTranscriptionStallFallsOver(t *testing.T) {
	g := newAudioGateway(t, 2)
	g.ups[0].Enqueue(upstreamtest.PathTranscriptions, upstreamtest.StallAfter(0))
	ct, form := multipartForm(t, wav(0.5), "model", sttModel)
	ctx, cancel := context.WithTimeout(context.Background(), stallBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.sb.BaseURL+pathTranscriptions, bytes.NewReader(form))
	require.NoError(t, err)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "Bearer "+g.key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "the gateway answered within %s", stallBound)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	assert.Contains(t, string(raw), `"text"`)
	assert.Equal(t, 1, g.ups[0].Count(upstreamtest.PathTranscriptions))
	assert.Equal(t, 1, g.ups[1].Count(upstreamtest.PathTranscriptions), "the fallback answered")
}

// A count_tokens call whose Anthropic upstream sends its headers and then
// nothing gives way to the next connection after the stall timeout, as a
// whole answer does; before, it waited until the client gave up.
func TestCountTokensStallFallsOver(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	silent := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant-1"))
	counting := upstreamtest.New(t, upstreamtest.WithAPIKey("sk-ant-2"))
	for i, up := range []*upstreamtest.Server{silent, counting} {
		sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c" + string(rune('1'+i)),
			"apiKey": "sk-ant-" + string(rune('1'+i)), "priority": i + 1,
			"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-sonnet-4-6"}}})
	}
	key := gatewayKey(t, sb)
	silent.Enqueue(upstreamtest.PathCountTokens, upstreamtest.StallAfter(0))
	body := map[string]any{"model": "claude/claude-sonnet-4-6", "messages": []map[string]any{{"role": "user", "content": "count these words please"}}}
	status, raw, err := stallPost(t, sb, pathMessages+"/count_tokens", body, "x-api-key", key)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var n struct {
		InputTokens float64 `json:"input_tokens"`
	}
	require.NoError(t, json.Unmarshal(raw, &n))
	assert.Equal(t, float64(upstreamtest.Tokens("count these words please")), n.InputTokens)
	assert.Equal(t, 1, silent.Count(upstreamtest.PathCountTokens))
	assert.Equal(t, 1, counting.Count(upstreamtest.PathCountTokens), "the next connection counted")
}
