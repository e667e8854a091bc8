package credential

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrubbing is a candidate value that knows its credential, as dispatch's
// connection does.
type scrubbing struct{ credential string }

func (s scrubbing) Scrub(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(s.credential), []byte("[redacted]"))
}

// A connection that cannot be reached is cooled with a message that says
// why (the transport error's class and text), and no secret is in it: not
// the request URL's query string, not a URL's user info, not the key.
func TestCooldownMessageNamesTheTransportCause(t *testing.T) {
	const key = "sk-upstream-credential-123"
	dial := func(inner error) error {
		return &url.Error{Op: "Post", URL: "https://up.example/v1/chat?key=" + key,
			Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 443}, Err: inner}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)),
			"network: connection refused: dial tcp 10.0.0.1:443: connect: connection refused"},
		{"dns", &url.Error{Op: "Post", URL: "https://nowhere.invalid/v1?key=" + key,
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}}},
			"network: DNS lookup failed: dial tcp: lookup nowhere.invalid: no such host"},
		{"timeout", dial(timeoutErr{}), "timeout: timed out: dial tcp 10.0.0.1:443: i/o timeout"},
		{"a key in the text", fmt.Errorf("upstream stream: header %q refused", "Bearer "+key),
			`network: upstream stream: header "Bearer [redacted]" refused`},
		{"a URL in the text", errors.New(`proxy said: see http://user:pw@proxy.example:3128/help?token=` + key + ` now`),
			"network: proxy said: see http://proxy.example:3128/help now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			up := newUpstream(map[string]behaviour{"a": always(tc.err)})
			cs := []Candidate{{ConnectionID: "a", Value: scrubbing{key}}}
			_, err := h.eng.Do(context.Background(), Request{MachineID: "m1", Provider: "openai", Model: model, Candidates: cs}, up.attempt)
			require.Error(t, err)
			_, cd := h.remaining("a")
			assert.Equal(t, tc.want, cd.Message)
			assert.NotContains(t, cd.Message, key)
			assert.NotContains(t, cd.Message, "pw")
		})
	}
}

// An upstream that answered is described by its status, never its body.
func TestCooldownMessageOfAnAnswerHasNoBody(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": always(upErr(500, `{"error":{"message":"key sk-upstream-credential-123 broke"}}`))})
	_, err := h.do(up, cands("a"))
	require.Error(t, err)
	_, cd := h.remaining("a")
	assert.Equal(t, "server: upstream answered 500 Internal Server Error", cd.Message)
}
