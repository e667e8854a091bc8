package embeddings

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/internal/upstream"
)

// An upstream that sends its headers and then goes silent is cut off after
// the stall timeout with a timeout the credential engine falls over on; one
// that sends its body slowly, each byte within the timeout, is read whole.
func TestStalledAnswer(t *testing.T) {
	const timeout = 500 * time.Millisecond
	body := answerFor(7, FormatFloat)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		if strings.HasPrefix(r.URL.Path, "/stall/") {
			_, _ = w.Write(body[:len(body)/2])
			_ = rc.Flush()
			<-r.Context().Done()
			return
		}
		for i := range body {
			_, _ = w.Write(body[i : i+1])
			_ = rc.Flush()
			if i%(len(body)/8) == 0 {
				time.Sleep(timeout / 6) // slow, never silent for the timeout
			}
		}
	}))
	t.Cleanup(up.Close)
	s := New(nil, Options{StallTimeout: timeout})
	req := Request{Texts: []string{"7"}}

	t.Run("stalled", func(t *testing.T) {
		c := &dispatch.Conn{BaseURL: up.URL + "/stall", Client: up.Client()}
		var out Response
		err := s.attempt(context.Background(), c, appendRequest(nil, "m", &req, FormatFloat), FormatFloat, true, 1, &out)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "stalled for 500ms", "half the answer came, then nothing")
		f := credential.Classify(err, time.Now())
		assert.Equal(t, credential.ReasonTimeout, f.Reason)
		assert.True(t, f.Fallback, "the next connection gets the request")
		assert.False(t, f.Committed)
	})
	t.Run("slow", func(t *testing.T) {
		c := &dispatch.Conn{BaseURL: up.URL, Client: up.Client()}
		var out Response
		require.NoError(t, s.attempt(context.Background(), c, appendRequest(nil, "m", &req, FormatFloat), FormatFloat, true, 1, &out))
		assert.Equal(t, string(body), string(out.Body))
	})
}

// The default applies when no stall timeout is given.
func TestStallTimeoutDefault(t *testing.T) {
	assert.Equal(t, upstream.DefaultStallTimeout, New(nil, Options{}).opts.StallTimeout)
}
