package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// silentConn is a body whose reads block until the call is cancelled, after
// handing out what it was given.
type silentConn struct {
	ctx  context.Context
	data []byte
}

func (s *silentConn) Read(p []byte) (int, error) {
	if len(s.data) > 0 {
		n := copy(p, s.data)
		s.data = s.data[n:]
		return n, nil
	}
	<-s.ctx.Done()
	return 0, net.ErrClosed
}

// A body that says nothing is cut after the first-byte bound, one that
// stops midway after the stall bound, each with a timeout error that says
// which; time spent between reads is not the upstream's silence.
func TestStallReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"nothing after the headers", "", "sent nothing for 40ms"},
		{"stopped midway", "half", "stalled for 60ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			sr := NewStallReader(&silentConn{ctx: call, data: []byte(tc.data)}, 40*time.Millisecond, 60*time.Millisecond, cancel)
			defer sr.Stop()
			got, err := io.ReadAll(sr)
			assert.Equal(t, tc.data, string(got))
			err = sr.Err(call, err)
			var se *StallError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), tc.want)
			var timeout interface{ Timeout() bool }
			require.True(t, errors.As(err, &timeout) && timeout.Timeout(), "a timeout for the credential engine")
		})
	}
	t.Run("slow reader, prompt upstream", func(t *testing.T) {
		call, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		sr := NewStallReader(&silentConn{ctx: call, data: []byte("abc")}, 250*time.Millisecond, 250*time.Millisecond, cancel)
		defer sr.Stop()
		buf := make([]byte, 1)
		for range 3 {
			_, err := sr.Read(buf)
			require.NoError(t, err)
			time.Sleep(400 * time.Millisecond) // the client is slow, not the upstream
		}
		assert.NoError(t, context.Cause(call), "the call goes on")
		assert.NoError(t, sr.Err(call, nil))
	})
}
