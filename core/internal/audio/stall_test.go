package audio

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
)

// Speech audio read under the watchdog: silence before the first byte is a
// timeout the next connection answers; silence mid-audio ends the answer
// (committed: no fallback); a slow client, which holds the relay between
// reads, is not the upstream's silence.
func TestSpeechStall(t *testing.T) {
	const timeout = 500 * time.Millisecond
	audio := bytes.Repeat([]byte{1, 2, 3, 4}, 4096)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "audio/wav")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		after, _ := strconv.Atoi(r.URL.Query().Get("stall"))
		for i := 0; i < len(audio); i += 1024 {
			if after >= 0 && i/1024 == after {
				<-r.Context().Done()
				return
			}
			_, _ = w.Write(audio[i : i+1024])
			_ = rc.Flush()
			if after < 0 {
				time.Sleep(time.Millisecond) // chunk by chunk
			}
		}
	}))
	t.Cleanup(up.Close)
	s := New(nil, Options{StallTimeout: timeout})
	speak := func(t *testing.T, stall int, sink Sink) (SpeechResult, error) {
		t.Helper()
		w := s.watch(context.Background())
		defer w.close()
		req, err := http.NewRequestWithContext(w.call, http.MethodPost, up.URL+"/?stall="+strconv.Itoa(stall), nil)
		require.NoError(t, err)
		resp, err := send(&dispatch.Conn{Client: up.Client()}, req, w)
		require.NoError(t, err)
		defer resp.Body.Close()
		out := SpeechResult{ContentType: "audio/wav"}
		return out, relay(context.Background(), resp.Body, sink, &out, w)
	}
	var got []byte
	keep := func(c Chunk) error { got = append(got, c.Data...); return nil }

	t.Run("before the first byte", func(t *testing.T) {
		got = nil
		_, err := speak(t, 0, keep)
		require.Error(t, err)
		f := credential.Classify(err, time.Now())
		assert.Equal(t, credential.ReasonTimeout, f.Reason)
		assert.True(t, f.Fallback)
		assert.False(t, f.Committed, "nothing reached the client")
		assert.Empty(t, got)
	})
	t.Run("mid-audio", func(t *testing.T) {
		got = nil
		out, err := speak(t, 3, keep)
		require.Error(t, err)
		assert.True(t, credential.IsCommitted(err), "bytes reached the client: no fallback")
		assert.Equal(t, audio[:3*1024], got)
		assert.EqualValues(t, 3*1024, out.Bytes)
	})
	t.Run("slow client", func(t *testing.T) {
		got = nil
		calls := 0
		slow := func(c Chunk) error {
			if calls++; calls <= 2 {
				time.Sleep(timeout * 3 / 2) // the client takes its time, the upstream does not
			}
			return keep(c)
		}
		_, err := speak(t, -1, slow)
		require.NoError(t, err)
		assert.Equal(t, audio, got)
	})
}
