package credential

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// inFlight starts a request whose attempt on connection "a" waits for
// release before answering with err (nil: success), and returns once that
// attempt has begun; the request's outcome arrives on the returned channel.
func inFlight(h *harness, err error) (release chan struct{}, done chan error) {
	release, done = make(chan struct{}), make(chan error, 1)
	started := make(chan struct{})
	attempt := func(ctx context.Context, c Candidate) error {
		if c.ConnectionID != "a" {
			return nil
		}
		close(started)
		<-release
		return err
	}
	go func() {
		_, err := h.eng.Do(context.Background(), Request{MachineID: "m1", Provider: "openai", Model: model, Candidates: cands("a", "b")}, attempt)
		done <- err
	}()
	<-started
	return release, done
}

// A connection told to wait an hour (429, Retry-After: 3600) stays cooled
// for the hour when a request that was already in flight on it fails
// afterwards with a 500: that failure's 30 s do not replace the hour.
func TestDoInFlightFailureKeepsLongerCooldown(t *testing.T) {
	h := newHarness()
	release, done := inFlight(h, upErr(500, `{"error":{"message":"boom"}}`))

	// Meanwhile the upstream rate limits the connection for an hour.
	up := newUpstream(map[string]behaviour{"a": always(retryAfterHeader(3600))})
	_, err := h.do(up, cands("a", "b"))
	require.NoError(t, err)
	d, _ := h.remaining("a")
	require.Equal(t, time.Hour, d)

	close(release)
	require.NoError(t, <-done)

	d, cd := h.remaining("a")
	require.Equal(t, time.Hour, d, "the hour's cooldown was replaced (%s)", cd.Reason)
	require.Equal(t, ReasonRateLimited, cd.Reason)

	// The hour is kept by the next request too, not called before it ends.
	_, err = h.do(up, cands("a", "b"))
	require.NoError(t, err)
	require.Equal(t, 1, up.Calls("a"))
}

// A request that started when the connection's earlier cooldown had just
// ended (its record retained) and succeeds after a new 429 with
// Retry-After: 3600 clears the record it saw, not the new hour.
func TestDoInFlightSuccessKeepsNewerCooldown(t *testing.T) {
	h := newHarness()
	// An earlier 2 s cooldown, now over (the record is retained).
	up := newUpstream(map[string]behaviour{"a": firstN(1, retryAfterHeader(2))})
	_, err := h.do(up, cands("a", "b"))
	require.NoError(t, err)
	h.clock.Advance(3 * time.Second)

	release, done := inFlight(h, nil)

	up = newUpstream(map[string]behaviour{"a": always(retryAfterHeader(3600))})
	_, err = h.do(up, cands("a", "b"))
	require.NoError(t, err)
	d, _ := h.remaining("a")
	require.Equal(t, time.Hour, d)

	close(release)
	require.NoError(t, <-done)
	d, _ = h.remaining("a")
	require.Equal(t, time.Hour, d, "the new hour-long cooldown was cleared by an older request's success")
}

// A success still clears the record its request saw, so the next failure
// starts the backoff again at its first level.
func TestDoInFlightSuccessClearsTheRecordItSaw(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": firstN(1, upErr(429, ""))})
	_, err := h.do(up, cands("a", "b"))
	require.NoError(t, err)
	h.clock.Advance(3 * time.Second)

	release, done := inFlight(h, nil)
	close(release)
	require.NoError(t, <-done)
	_, ok := h.store.Get("a", model)
	require.False(t, ok, "the success cleared the record it saw")
}

// A request whose only connection fails while a longer cooldown was written
// tells its client to come back when that cooldown ends, not after its own
// shorter one.
func TestDoInFlightFailureAnswersTheLongerCooldown(t *testing.T) {
	h := newHarness()
	release, done := make(chan struct{}), make(chan error, 1)
	started := make(chan struct{})
	go func() {
		_, err := h.eng.Do(context.Background(), Request{Provider: "openai", Model: model, Candidates: cands("a")}, func(context.Context, Candidate) error {
			close(started)
			<-release
			return upErr(429, `{"error":{"message":"Rate limit reached"}}`)
		})
		done <- err
	}()
	<-started

	up := newUpstream(map[string]behaviour{"a": always(retryAfterHeader(3600))})
	_, err := h.do(up, cands("a"))
	require.Equal(t, time.Hour, exhausted(t, err).RetryAfter)

	close(release)
	ex := exhausted(t, <-done)
	require.Equal(t, 429, ex.Status)
	require.Equal(t, time.Hour, ex.RetryAfter, "the connection is back in an hour")
}
