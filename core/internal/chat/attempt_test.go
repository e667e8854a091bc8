package chat

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/internal/provider"
)

// readBody reads what io.ReadAll reads, whatever size was announced.
func TestReadBody(t *testing.T) {
	body := strings.Repeat(`{"id":"chatcmpl-1","choices":[]}`, 40)
	for _, tc := range []struct {
		name string
		size int64
		r    func() io.Reader
	}{
		{"announced", int64(len(body)), func() io.Reader { return strings.NewReader(body) }},
		{"unknown", -1, func() io.Reader { return strings.NewReader(body) }},
		{"announced short", 10, func() io.Reader { return strings.NewReader(body) }},
		{"announced long", int64(len(body)) * 3, func() io.Reader { return strings.NewReader(body) }},
		{"one byte at a time", int64(len(body)), func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readBody(tc.r(), tc.size)
			require.NoError(t, err)
			assert.Equal(t, body, string(got))
		})
	}
	got, err := readBody(strings.NewReader(""), 0)
	require.NoError(t, err)
	assert.Empty(t, got, "an empty answer")

	boom := errors.New("boom")
	_, err = readBody(iotest.ErrReader(boom), 10)
	assert.ErrorIs(t, err, boom)
	got, err = readBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 3)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, "abc", string(got), "what was read before the error, as io.ReadAll")
}

// An answer longer than maxBody is cut at maxBody, announced or not.
func TestReadBodyCapped(t *testing.T) {
	big := func() io.Reader { return io.LimitReader(zeros{}, maxBody+10) }
	for _, size := range []int64{-1, maxBody + 10, maxBody - 1} {
		got, err := readBody(big(), size)
		require.NoError(t, err)
		assert.Len(t, got, maxBody)
		assert.True(t, bytes.Count(got[:16], []byte{0}) == 16)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// hang is a step of a scripted upstream that sends nothing more until the
// test ends.
type hang struct{}

// scripted is an upstream's stream that follows steps: a string is sent,
// a duration waited, hang{} ends the sending without ending the stream.
func scripted(t *testing.T, steps ...any) *io.PipeReader {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	t.Cleanup(func() { close(done); _ = pw.Close() })
	go func() {
		for _, s := range steps {
			switch s := s.(type) {
			case string:
				if _, err := io.WriteString(pw, s); err != nil {
					return
				}
			case time.Duration:
				time.Sleep(s)
			case hang:
				<-done
				return
			}
		}
		_ = pw.Close()
	}()
	return pr
}

// thinking is what an upstream sends while its model thinks for d: a
// keep-alive comment every d/8 (OpenRouter's).
func thinking(d time.Duration) []any {
	var steps []any
	for range 8 {
		steps = append(steps, d/8, ": OPENROUTER PROCESSING\n\n")
	}
	return steps
}

func steps(parts ...any) []any {
	var out []any
	for _, p := range parts {
		if s, ok := p.([]any); ok {
			out = append(out, s...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// An upstream whose model thinks for longer than the stall timeout in the
// middle of its answer, and says so with keep-alive comments, is alive: its
// answer reaches the client whole. Silence after the comments is still a
// stall.
func TestStreamKeepAliveCommentsMidStreamAreNotAStall(t *testing.T) {
	const stall = 150 * time.Millisecond
	sink := newBatchRecorder()
	_, a, err := streamWithin(t, time.Minute, stall, DialectChat, chatUpstream, sink,
		scripted(t, steps(sseOf(chunk("Let me think. ")), thinking(3*stall), sseOf(chunk("Done."), finish, "[DONE]"))...))
	require.NoError(t, err)
	assert.True(t, a.sent)
	assert.Equal(t, [][]string{{chunk("Let me think. ")}, {chunk("Done."), finish}}, sink.snapshot())

	start := time.Now()
	_, _, err = streamWithin(t, time.Minute, stall, DialectChat, chatUpstream, newBatchRecorder(),
		scripted(t, steps(sseOf(chunk("Let me think. ")), thinking(stall), hang{})...))
	var se *credential.StreamError
	require.True(t, errors.As(err, &se), "%T %v", err, err)
	assert.Equal(t, "stream_stalled", se.Code)
	assert.True(t, credential.IsCommitted(err))
	assert.Less(t, time.Since(start), 10*stall, "the stall timeout after the last comment")
}

// An upstream whose model thinks for longer than the first event timeout
// before its first event, and says so with keep-alive comments, keeps the
// request: giving it to the next connection would have the user pay for
// it twice. A comment is no first event: the upstream keeps the first
// event timeout (not the shorter stall timeout) for its silences, and
// once it falls silent that long the next connection may still answer.
func TestStreamKeepAliveCommentsBeforeTheFirstEvent(t *testing.T) {
	const first, stall = 400 * time.Millisecond, 100 * time.Millisecond
	answer := sseOf(chunk("Done."), finish, "[DONE]")

	t.Run("thinking past the first event timeout", func(t *testing.T) {
		sink := newBatchRecorder()
		_, _, err := streamWithin(t, first, stall, DialectChat, chatUpstream, sink,
			scripted(t, steps(thinking(2*first), answer)...))
		require.NoError(t, err)
		assert.Equal(t, [][]string{{chunk("Done."), finish}}, sink.snapshot())
	})
	t.Run("silent past the stall timeout after a comment", func(t *testing.T) {
		_, _, err := streamWithin(t, first, stall, DialectChat, chatUpstream, newBatchRecorder(),
			scripted(t, ": OPENROUTER PROCESSING\n\n", 3*stall, answer))
		require.NoError(t, err)
	})
	t.Run("silent past the first event timeout after a comment", func(t *testing.T) {
		sink := newBatchRecorder()
		_, a, err := streamWithin(t, first, stall, DialectChat, chatUpstream, sink,
			scripted(t, ": OPENROUTER PROCESSING\n\n", hang{}))
		require.Error(t, err)
		assert.False(t, a.sent)
		assert.False(t, credential.IsCommitted(err), "the next connection may answer")
		var up *credential.UpstreamError
		require.True(t, errors.As(err, &up), "%T %v", err, err)
		assert.Contains(t, string(up.Body), "went silent for 400ms before its answer began")
		assert.Empty(t, sink.snapshot())
	})
}

// An event the client does not see (a usage-only chunk, Anthropic's ping
// for a chat client) does not begin the answer: the upstream keeps the
// first event timeout until one that does, where it got the stall timeout
// and, silent past it, was given up for the next connection before it
// said a word.
func TestStreamAnEventTheClientDoesNotSeeIsNotTheFirst(t *testing.T) {
	const first, stall = 600 * time.Millisecond, 100 * time.Millisecond
	const usageOnly = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":0,"total_tokens":5}}`
	const anthropicEnd = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name     string
		client   Dialect
		upstream provider.Spec
		unseen   string
		answer   string
	}{
		{"chat over chat, a usage-only chunk", DialectChat, chatUpstream, sseOf(usageOnly), sseOf(chunk("Done."), finish, "[DONE]")},
		{"chat over anthropic, a ping", DialectChat, anthropicUpstream, "event: ping\ndata: {\"type\":\"ping\"}\n\n", anthropicStart + anthropicEnd},
		{"responses over anthropic, a ping", DialectResponses, anthropicUpstream, "event: ping\ndata: {\"type\":\"ping\"}\n\n", anthropicStart + anthropicEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newBatchRecorder()
			_, a, err := streamWithin(t, first, stall, tc.client, tc.upstream, sink, scripted(t, tc.unseen, 3*stall, tc.answer))
			require.NoError(t, err)
			assert.True(t, a.sent)

			sink = newBatchRecorder()
			_, a, err = streamWithin(t, first, stall, tc.client, tc.upstream, sink, scripted(t, tc.unseen, hang{}))
			require.Error(t, err)
			require.False(t, a.sent, "the client got nothing")
			assert.Empty(t, sink.snapshot())
			assert.False(t, credential.IsCommitted(err), "the next connection may answer")
		})
	}
}
