package credential

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

const model = "gpt-test"

// harness is an engine on a fake clock with an in-memory store.
type harness struct {
	clock *fakeClock
	store *MemoryCooldowns
	eng   *Engine
}

func newHarness(opts ...Option) *harness {
	clock := newFakeClock()
	store := NewMemoryCooldowns(clock.Now, 0)
	opts = append([]Option{WithClock(clock.Now)}, opts...)
	return &harness{clock: clock, store: store, eng: New(store, opts...)}
}

func (h *harness) do(up *fakeUpstream, cs []Candidate) (Result, error) {
	return h.eng.Do(context.Background(), Request{MachineID: "m1", Provider: "openai", Model: model, Candidates: cs}, up.attempt)
}

// remaining returns how long the connection still cools for the model, and
// its record; zero when it is not cooling.
func (h *harness) remaining(id string) (time.Duration, Cooldown) {
	c, ok := h.store.Get(id, model)
	if !ok || !c.Until.After(h.clock.Now()) {
		return 0, c
	}
	return c.Until.Sub(h.clock.Now()), c
}

func exhausted(t *testing.T, err error) *ExhaustedError {
	t.Helper()
	var ex *ExhaustedError
	require.ErrorAs(t, err, &ex)
	return ex
}

type cooled struct {
	Reason Reason
	For    time.Duration
}

// TestDoSingleRequest covers the failover rows that one request shows: who
// answers, which attempts were made, what is cooled down.
func TestDoSingleRequest(t *testing.T) {
	reset := &url.Error{Op: "Post", URL: "https://up.example/v1?key=secret", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}
	deadline := &url.Error{Op: "Post", URL: "https://up.example/v1", Err: context.DeadlineExceeded}
	ctxLen := upErr(400, `{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}`)
	filter := upErr(400, `{"error":{"code":"content_filter","message":"The response was filtered due to the prompt triggering the content management policy"}}`)

	tests := []struct {
		name      string
		script    map[string]behaviour
		cands     []Candidate
		wantBy    string // connection that answered; "" when Do fails
		wantErr   func(t *testing.T, err error)
		wantCalls map[string]int
		wantCool  map[string]cooled
	}{
		{
			name:      "happy path uses the primary",
			script:    map[string]behaviour{},
			wantBy:    "a",
			wantCalls: map[string]int{"a": 1},
			wantCool:  map[string]cooled{},
		},
		{
			name:      "429 Retry-After falls back",
			script:    map[string]behaviour{"a": always(retryAfterHeader(2))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonRateLimited, 2 * time.Second}},
		},
		{
			name:      "429 without Retry-After falls back",
			script:    map[string]behaviour{"a": always(upErr(429, ""))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonRateLimited, 2 * time.Second}},
		},
		{
			name:      "500 once falls back",
			script:    map[string]behaviour{"a": firstN(1, upErr(500, "boom"))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonServer, 30 * time.Second}},
		},
		{
			name:      "connection reset falls back",
			script:    map[string]behaviour{"a": always(reset)},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonNetwork, 30 * time.Second}},
		},
		{
			name:      "attempt timeout falls back",
			script:    map[string]behaviour{"a": always(deadline)},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonTimeout, 30 * time.Second}},
		},
		{
			name:      "408 falls back",
			script:    map[string]behaviour{"a": always(upErr(408, ""))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonTimeout, 30 * time.Second}},
		},
		{
			name:      "401 without refresh material falls back",
			script:    map[string]behaviour{"a": always(upErr(401, ""))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonAuth, 2 * time.Minute}},
		},
		{
			name:      "402 falls back",
			script:    map[string]behaviour{"a": always(upErr(402, "payment required"))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonPayment, 2 * time.Minute}},
		},
		{
			name:      "quota text in a 400 falls back",
			script:    map[string]behaviour{"a": always(upErr(400, `{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}`))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonQuota, 2 * time.Second}},
		},
		{
			name:      "quota text in a 403 falls back",
			script:    map[string]behaviour{"a": always(upErr(403, `Usage limit reached for this billing period`))},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonQuota, 2 * time.Second}},
		},
		{
			name:   "400 context length passed through",
			script: map[string]behaviour{"a": always(ctxLen)},
			wantErr: func(t *testing.T, err error) {
				var up *UpstreamError
				require.ErrorAs(t, err, &up)
				require.Same(t, ctxLen, up)
			},
			wantCalls: map[string]int{"a": 1},
			wantCool:  map[string]cooled{},
		},
		{
			name:   "400 content filter passed through",
			script: map[string]behaviour{"a": always(filter)},
			wantErr: func(t *testing.T, err error) {
				require.ErrorIs(t, err, filter)
			},
			wantCalls: map[string]int{"a": 1},
			wantCool:  map[string]cooled{},
		},
		{
			name:   "404 passed through",
			script: map[string]behaviour{"a": always(upErr(404, "no such model"))},
			wantErr: func(t *testing.T, err error) {
				var up *UpstreamError
				require.ErrorAs(t, err, &up)
				require.Equal(t, 404, up.Status)
			},
			wantCalls: map[string]int{"a": 1},
			wantCool:  map[string]cooled{},
		},
		{
			name: "mixed errors pass the last upstream error through",
			script: map[string]behaviour{
				"a": always(upErr(500, "a")),
				"b": always(reset),
				"c": always(upErr(503, "c down", "X-Upstream", "c")),
			},
			cands: cands("a", "b", "c"),
			wantErr: func(t *testing.T, err error) {
				ex := exhausted(t, err)
				require.Equal(t, 503, ex.Status)
				require.Equal(t, CodeUpstreamError, ex.Code)
				require.Equal(t, "c down", string(ex.Last.Body))
				require.Equal(t, "c", ex.Last.Header.Get("X-Upstream"))
				require.Zero(t, ex.RetryAfter)
			},
			wantCalls: map[string]int{"a": 1, "b": 1, "c": 1},
			wantCool: map[string]cooled{
				"a": {ReasonServer, 30 * time.Second},
				"b": {ReasonNetwork, 30 * time.Second},
				"c": {ReasonServer, 30 * time.Second},
			},
		},
		{
			name: "mixed errors ending on a network error still pass the last upstream answer",
			script: map[string]behaviour{
				"a": always(upErr(429, "")),
				"b": always(upErr(500, "b")),
				"c": always(reset),
			},
			cands: cands("a", "b", "c"),
			wantErr: func(t *testing.T, err error) {
				ex := exhausted(t, err)
				require.Equal(t, 500, ex.Status)
				require.Equal(t, CodeUpstreamError, ex.Code)
			},
			wantCalls: map[string]int{"a": 1, "b": 1, "c": 1},
			wantCool: map[string]cooled{
				"a": {ReasonRateLimited, 2 * time.Second},
				"b": {ReasonServer, 30 * time.Second},
				"c": {ReasonNetwork, 30 * time.Second},
			},
		},
		{
			name:   "all network failures give 502",
			script: map[string]behaviour{"a": always(reset), "b": always(deadline)},
			wantErr: func(t *testing.T, err error) {
				ex := exhausted(t, err)
				require.Equal(t, 502, ex.Status)
				require.Equal(t, CodeUpstreamUnreachable, ex.Code)
				require.Nil(t, ex.Last)
				require.NotContains(t, ex.Error(), "secret")
			},
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool: map[string]cooled{
				"a": {ReasonNetwork, 30 * time.Second},
				"b": {ReasonTimeout, 30 * time.Second},
			},
		},
		{
			name:   "every connection rate limited gives 429 with the earliest end",
			script: map[string]behaviour{"a": always(retryAfterHeader(5)), "b": always(retryAfterHeader(3))},
			wantErr: func(t *testing.T, err error) {
				ex := exhausted(t, err)
				require.Equal(t, 429, ex.Status)
				require.Equal(t, CodeRateLimited, ex.Code)
				require.Equal(t, 3*time.Second, ex.RetryAfter)
				require.Equal(t, "[openai/gpt-test] all credentials are rate limited (reset after 3s)", ex.Message)
			},
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool: map[string]cooled{
				"a": {ReasonRateLimited, 5 * time.Second},
				"b": {ReasonRateLimited, 3 * time.Second},
			},
		},
		{
			name:   "rate limit and quota together give 429",
			script: map[string]behaviour{"a": always(upErr(429, "")), "b": always(upErr(400, `{"error":"monthly budget exceeded"}`))},
			wantErr: func(t *testing.T, err error) {
				ex := exhausted(t, err)
				require.Equal(t, 429, ex.Status)
				require.Equal(t, 2*time.Second, ex.RetryAfter)
			},
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool: map[string]cooled{
				"a": {ReasonRateLimited, 2 * time.Second},
				"b": {ReasonQuota, 2 * time.Second},
			},
		},
		{
			name: "every connection out of quota passes the last answer through",
			script: map[string]behaviour{
				"a": always(upErr(429, `{"error":{"code":"insufficient_quota"}}`)),
				"b": always(upErr(400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low"}}`)),
			},
			wantErr: func(t *testing.T, err error) {
				ex := exhausted(t, err)
				require.Equal(t, 400, ex.Status)
				require.Equal(t, CodeUpstreamError, ex.Code)
				require.Contains(t, string(ex.Last.Body), "credit balance")
				require.Equal(t, "[openai/gpt-test] all credentials are out of quota; last upstream answer 400 Bad Request", ex.Message)
			},
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool: map[string]cooled{
				"a": {ReasonQuota, 2 * time.Second},
				"b": {ReasonQuota, 2 * time.Second},
			},
		},
		{
			name:   "committed error neither falls back nor retries",
			script: map[string]behaviour{"a": always(Committed(io.ErrUnexpectedEOF))},
			wantErr: func(t *testing.T, err error) {
				require.True(t, IsCommitted(err))
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			},
			wantCalls: map[string]int{"a": 1},
			wantCool:  map[string]cooled{"a": {ReasonNetwork, 30 * time.Second}},
		},
		{
			name:   "committed 401 is not refreshed",
			script: map[string]behaviour{"a": always(Committed(upErr(401, "")))},
			cands:  []Candidate{{ConnectionID: "a", CanRefresh: true}, {ConnectionID: "b"}},
			wantErr: func(t *testing.T, err error) {
				require.True(t, IsCommitted(err))
			},
			wantCalls: map[string]int{"a": 1},
			wantCool:  map[string]cooled{"a": {ReasonAuth, 2 * time.Minute}},
		},
		{
			name:      "duplicate connections are tried once",
			script:    map[string]behaviour{"a": always(upErr(500, ""))},
			cands:     []Candidate{{ConnectionID: "a"}, {ConnectionID: "a"}, {ConnectionID: "b", Priority: 1}},
			wantBy:    "b",
			wantCalls: map[string]int{"a": 1, "b": 1},
			wantCool:  map[string]cooled{"a": {ReasonServer, 30 * time.Second}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(WithRefresher(RefreshFunc(func(context.Context, Candidate) (Candidate, error) {
				t.Fatal("unexpected refresh")
				return Candidate{}, nil
			})))
			up := newUpstream(tt.script)
			cs := tt.cands
			if cs == nil {
				cs = cands("a", "b")
			}
			res, err := h.do(up, cs)
			if tt.wantErr != nil {
				require.Error(t, err)
				tt.wantErr(t, err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tt.wantBy, res.Candidate.ConnectionID)
			}

			gotCalls := map[string]int{}
			for _, c := range cs {
				if n := up.Calls(c.ConnectionID); n > 0 {
					gotCalls[c.ConnectionID] = n
				}
			}
			require.Equal(t, tt.wantCalls, gotCalls)
			total := 0
			for _, n := range tt.wantCalls {
				total += n
			}
			require.Equal(t, total, res.Attempts)

			gotCool := map[string]cooled{}
			for _, c := range cs {
				if d, rec := h.remaining(c.ConnectionID); d > 0 {
					gotCool[c.ConnectionID] = cooled{rec.Reason, d}
				}
			}
			if diff := cmp.Diff(tt.wantCool, gotCool); diff != "" {
				t.Errorf("cooldowns mismatch (-want +got):\n%s", diff)
			}
			require.Len(t, res.Failed, len(tt.wantCool))
			for _, f := range res.Failed {
				require.Equal(t, tt.wantCool[f.ConnectionID].Reason, f.Reason)
				require.Equal(t, tt.wantCool[f.ConnectionID].For, f.Cooldown)
			}
		})
	}
}

// Failover 1: primary cooled for about its Retry-After, then used again.
func TestDoRetryAfterThenPrimaryAgain(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": firstN(1, retryAfterHeader(2))})

	res, err := h.do(up, cands("a", "b"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Candidate.ConnectionID)
	d, _ := h.remaining("a")
	require.Equal(t, 2*time.Second, d)

	h.clock.Advance(1500 * time.Millisecond)
	res, err = h.do(up, cands("a", "b"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Candidate.ConnectionID, "primary still cooling")
	require.Equal(t, 1, up.Calls("a"))

	h.clock.Advance(600 * time.Millisecond)
	res, err = h.do(up, cands("a", "b"))
	require.NoError(t, err)
	require.Equal(t, "a", res.Candidate.ConnectionID, "primary back after its cooldown")
	_, ok := h.store.Get("a", model)
	require.False(t, ok, "success clears the cooldown")
}

// Failover 2: without Retry-After the cooldown doubles per consecutive rate
// limit, capped at 5 min; a success resets the level.
func TestDoExponentialBackoff(t *testing.T) {
	h := newHarness()
	var healthy bool
	up := newUpstream(map[string]behaviour{"a": func(int, Candidate) error {
		if healthy {
			return nil
		}
		return upErr(429, `{"error":{"message":"Rate limit reached"}}`)
	}})

	want := []time.Duration{2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300}
	for i, w := range want {
		res, err := h.do(up, cands("a", "b"))
		require.NoError(t, err)
		require.Equal(t, "b", res.Candidate.ConnectionID)
		d, rec := h.remaining("a")
		require.Equal(t, w*time.Second, d, "failure %d", i+1)
		require.Equal(t, min(i+1, maxLevel), rec.Level)
		h.clock.Advance(d)
	}

	healthy = true
	res, err := h.do(up, cands("a", "b"))
	require.NoError(t, err)
	require.Equal(t, "a", res.Candidate.ConnectionID)

	healthy = false
	_, err = h.do(up, cands("a", "b"))
	require.NoError(t, err)
	d, rec := h.remaining("a")
	require.Equal(t, 2*time.Second, d, "level reset by the success")
	require.Equal(t, 1, rec.Level)
}

// A failure of another kind breaks the run of rate limits.
func TestDoBackoffLevelResetsOnOtherFailure(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": calls(upErr(429, ""), upErr(429, ""), upErr(500, ""), upErr(429, ""))})
	wantLevel := []int{1, 2, 0, 1}
	for i, w := range wantLevel {
		_, err := h.do(up, cands("a", "b"))
		require.NoError(t, err)
		d, rec := h.remaining("a")
		require.Equal(t, w, rec.Level, "failure %d", i+1)
		h.clock.Advance(d)
	}
}

// Failover 4: a primary answering 503 every time is called once per
// cooldown, not once per request.
func TestDoNoCallStorm(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": always(upErr(503, "unavailable"))})
	for range 20 {
		res, err := h.do(up, cands("a", "b"))
		require.NoError(t, err)
		require.Equal(t, "b", res.Candidate.ConnectionID)
		h.clock.Advance(time.Second)
	}
	require.Equal(t, 1, up.Calls("a"))
	require.Equal(t, 20, up.Calls("b"))

	h.clock.Advance(10 * time.Second) // past the 30 s cooldown
	_, err := h.do(up, cands("a", "b"))
	require.NoError(t, err)
	require.Equal(t, 2, up.Calls("a"))
}

// Failover 14: once every connection is cooling for rate limits, requests
// get 429 without any attempt, Retry-After the earliest end, at least 1 s.
func TestDoAllRateLimitedWhileCooling(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{
		"a": always(retryAfterHeader(5)),
		"b": always(upErr(429, "", "Retry-After-Ms", "2300")),
	})
	_, err := h.do(up, cands("a", "b"))
	ex := exhausted(t, err)
	require.Equal(t, 3*time.Second, ex.RetryAfter, "2.3 s rounds up")

	h.clock.Advance(time.Second)
	res, err := h.do(up, cands("a", "b"))
	ex = exhausted(t, err)
	require.Equal(t, 429, ex.Status)
	require.Equal(t, CodeRateLimited, ex.Code)
	require.Equal(t, 2*time.Second, ex.RetryAfter)
	require.Zero(t, res.Attempts)
	require.Nil(t, ex.Last, "no upstream answered in this request")

	h.clock.Advance(1200 * time.Millisecond) // b ends in 100 ms
	_, err = h.do(up, cands("a", "b"))
	ex = exhausted(t, err)
	require.Equal(t, time.Second, ex.RetryAfter, "at least one second")
	require.Equal(t, 2, up.Calls("a")+up.Calls("b"))
}

// Every connection cooling for other reasons: 503 with Retry-After.
func TestDoAllCoolingForOtherReasons(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": always(upErr(500, "")), "b": always(upErr(401, ""))})
	_, err := h.do(up, cands("a", "b"))
	ex := exhausted(t, err)
	require.Equal(t, 401, ex.Status, "last upstream error")

	h.clock.Advance(10 * time.Second)
	res, err := h.do(up, cands("a", "b"))
	ex = exhausted(t, err)
	require.Equal(t, 503, ex.Status)
	require.Equal(t, CodeCoolingDown, ex.Code)
	require.Equal(t, 20*time.Second, ex.RetryAfter, "a ends first")
	require.Zero(t, res.Attempts)
	require.Contains(t, ex.Message, "[openai/gpt-test]")

	// Mixed cooling reasons, nothing tried: still 503.
	h2 := newHarness()
	up2 := newUpstream(map[string]behaviour{"a": always(upErr(429, "")), "b": always(upErr(500, ""))})
	_, err = h2.do(up2, cands("a", "b"))
	require.Equal(t, 500, exhausted(t, err).Status)
	_, err = h2.do(up2, cands("a", "b"))
	ex = exhausted(t, err)
	require.Equal(t, 503, ex.Status)
	require.Equal(t, 2*time.Second, ex.RetryAfter)
}

// A network failure while the others are rate limited is not "all rate
// limited", and no upstream answered: 502.
func TestDoNetworkFailureAmongRateLimited(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": firstN(1, upErr(429, "")), "b": always(io.ErrUnexpectedEOF)})
	_, err := h.do(up, cands("a"))
	exhausted(t, err)
	_, err = h.do(up, cands("a", "b"))
	require.Equal(t, 502, exhausted(t, err).Status)
}

// Failover 15: a flapping primary gets its traffic back after each cooldown.
func TestDoFlappingPrimary(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": calls(upErr(500, ""), nil, nil, upErr(503, ""), nil)})
	var by []string
	step := func(advance time.Duration) {
		res, err := h.do(up, cands("a", "b"))
		require.NoError(t, err)
		by = append(by, res.Candidate.ConnectionID)
		h.clock.Advance(advance)
	}
	step(10 * time.Second) // a fails, b answers
	step(21 * time.Second) // a cooling: b
	step(time.Second)      // a back
	step(time.Second)      // a
	step(time.Second)      // a fails, b answers
	step(30 * time.Second) // a cooling: b
	step(time.Second)      // a back
	require.Equal(t, []string{"b", "b", "a", "a", "b", "b", "a"}, by)
	require.Equal(t, 5, up.Calls("a"))
}

// Failover 17 and 18: token refresh on 401/403.
func TestDoRefresh(t *testing.T) {
	tokenCheck := func(status int) behaviour {
		return func(_ int, c Candidate) error {
			if c.Value != "fresh" {
				return upErr(status, `{"error":"token expired"}`)
			}
			return nil
		}
	}
	tests := []struct {
		name       string
		primary    behaviour
		refresh    func(Candidate) (Candidate, error)
		canRefresh bool
		wantBy     string
		wantValue  any
		wantCallsA int
		wantRefs   int
		wantCool   time.Duration
	}{
		{
			name:    "401 refresh succeeds",
			primary: tokenCheck(401),
			refresh: func(c Candidate) (Candidate, error) {
				c.Value = "fresh"
				return c, nil
			},
			canRefresh: true, wantBy: "a", wantValue: "fresh", wantCallsA: 2, wantRefs: 1,
		},
		{
			name:    "403 refresh succeeds",
			primary: tokenCheck(403),
			refresh: func(c Candidate) (Candidate, error) {
				c.Value = "fresh"
				return c, nil
			},
			canRefresh: true, wantBy: "a", wantValue: "fresh", wantCallsA: 2, wantRefs: 1,
		},
		{
			name:    "401 refresh fails",
			primary: tokenCheck(401),
			refresh: func(Candidate) (Candidate, error) {
				return Candidate{}, errors.New("invalid_grant")
			},
			canRefresh: true, wantBy: "b", wantCallsA: 1, wantRefs: 1, wantCool: 2 * time.Minute,
		},
		{
			name:    "401 again after refresh",
			primary: always(upErr(401, "")),
			refresh: func(c Candidate) (Candidate, error) {
				c.Value = "fresh"
				return c, nil
			},
			canRefresh: true, wantBy: "b", wantCallsA: 2, wantRefs: 1, wantCool: 2 * time.Minute,
		},
		{
			name:    "429 on the retry after refresh cools as a rate limit",
			primary: calls(upErr(401, ""), upErr(429, "", "Retry-After", "9")),
			refresh: func(c Candidate) (Candidate, error) {
				return c, nil
			},
			canRefresh: true, wantBy: "b", wantCallsA: 2, wantRefs: 1, wantCool: 9 * time.Second,
		},
		{
			name:       "no refresh material",
			primary:    tokenCheck(401),
			refresh:    func(c Candidate) (Candidate, error) { return c, nil },
			canRefresh: false, wantBy: "b", wantCallsA: 1, wantRefs: 0, wantCool: 2 * time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var refs int
			h := newHarness(WithRefresher(RefreshFunc(func(_ context.Context, c Candidate) (Candidate, error) {
				refs++
				return tt.refresh(c)
			})))
			up := newUpstream(map[string]behaviour{"a": tt.primary})
			cs := []Candidate{{ConnectionID: "a", CanRefresh: tt.canRefresh, Value: "stale"}, {ConnectionID: "b", Priority: 1}}
			res, err := h.do(up, cs)
			require.NoError(t, err)
			require.Equal(t, tt.wantBy, res.Candidate.ConnectionID)
			if tt.wantValue != nil {
				require.Equal(t, tt.wantValue, res.Candidate.Value)
			}
			require.Equal(t, tt.wantCallsA, up.Calls("a"))
			require.Equal(t, tt.wantRefs, refs)
			d, _ := h.remaining("a")
			require.Equal(t, tt.wantCool, d)
			if tt.wantCool > 0 {
				require.Len(t, res.Failed, 1)
				require.Equal(t, "a", res.Failed[0].ConnectionID)
			} else {
				require.Empty(t, res.Failed)
			}
		})
	}
}

func TestDoRefreshFailureKeepsBothErrors(t *testing.T) {
	refreshErr := errors.New("invalid_grant")
	h := newHarness(WithRefresher(RefreshFunc(func(context.Context, Candidate) (Candidate, error) {
		return Candidate{}, refreshErr
	})))
	up := newUpstream(map[string]behaviour{"a": always(upErr(401, ""))})
	_, err := h.do(up, []Candidate{{ConnectionID: "a", CanRefresh: true}})
	ex := exhausted(t, err)
	require.Equal(t, 401, ex.Status)
	require.Equal(t, CodeUpstreamError, ex.Code)
}

// The caller's own cancellation stops at once, tries nothing more and cools
// nothing.
func TestDoCallerCancelled(t *testing.T) {
	tests := []struct {
		name string
		err  func(cancel context.CancelFunc) error
	}{
		{"network error after cancel", func(cancel context.CancelFunc) error {
			cancel()
			return &url.Error{Op: "Post", URL: "u", Err: context.Canceled}
		}},
		{"upstream error after cancel", func(cancel context.CancelFunc) error {
			cancel()
			return upErr(503, "")
		}},
		{"committed error after cancel", func(cancel context.CancelFunc) error {
			cancel()
			return Committed(io.ErrUnexpectedEOF)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			up := newUpstream(map[string]behaviour{"a": func(int, Candidate) error { return tt.err(cancel) }})
			res, err := h.eng.Do(ctx, Request{Provider: "p", Model: model, Candidates: cands("a", "b")}, up.attempt)
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, 1, res.Attempts)
			require.Zero(t, up.Calls("b"))
			_, ok := h.store.Get("a", model)
			require.False(t, ok, "nothing cooled")
		})
	}

	t.Run("cancelled during refresh", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h := newHarness(WithRefresher(RefreshFunc(func(ctx context.Context, c Candidate) (Candidate, error) {
			cancel()
			return Candidate{}, ctx.Err()
		})))
		up := newUpstream(map[string]behaviour{"a": always(upErr(401, ""))})
		_, err := h.eng.Do(ctx, Request{Model: model, Candidates: []Candidate{{ConnectionID: "a", CanRefresh: true}, {ConnectionID: "b", Priority: 1}}}, up.attempt)
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, up.Calls("b"))
		_, ok := h.store.Get("a", model)
		require.False(t, ok)
	})

	t.Run("already cancelled", func(t *testing.T) {
		h := newHarness()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		up := newUpstream(nil)
		res, err := h.eng.Do(ctx, Request{Model: model, Candidates: cands("a")}, up.attempt)
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, res.Attempts)
	})

	t.Run("caller deadline is not an attempt timeout", func(t *testing.T) {
		h := newHarness()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		up := newUpstream(map[string]behaviour{"a": func(int, Candidate) error {
			cancel() // stands in for the caller's deadline passing
			return context.DeadlineExceeded
		}})
		_, err := h.eng.Do(ctx, Request{Model: model, Candidates: cands("a", "b")}, up.attempt)
		require.Error(t, err)
		require.Zero(t, up.Calls("b"))
	})
}

func TestDoNoCredentials(t *testing.T) {
	h := newHarness()
	_, err := h.do(newUpstream(nil), nil)
	require.ErrorIs(t, err, ErrNoCredentials)
}

func TestDoFillFirstOrder(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{
		"p1-a": always(upErr(500, "")),
		"p1-b": always(upErr(500, "")),
		"p0":   always(upErr(500, "")),
	})
	cs := []Candidate{
		{ConnectionID: "p2", Priority: 2},
		{ConnectionID: "p1-b", Priority: 1},
		{ConnectionID: "p1-a", Priority: 1},
		{ConnectionID: "p0", Priority: 0},
	}
	before := append([]Candidate(nil), cs...)
	res, err := h.do(up, cs)
	require.NoError(t, err)
	require.Equal(t, "p2", res.Candidate.ConnectionID)
	require.Equal(t, []string{"p0", "p1-a", "p1-b", "p2"}, up.Order())
	require.Equal(t, before, cs, "the request's slice is not modified")
	require.Len(t, res.Failed, 3)
}

func TestDoRoundRobin(t *testing.T) {
	rr := func(h *harness, up *fakeUpstream, machine string, cs []Candidate, sticky int) string {
		t.Helper()
		res, err := h.eng.Do(context.Background(), Request{
			MachineID: machine, Provider: "openai", Model: model, Candidates: cs,
			Strategy: StrategyRoundRobin, StickyLimit: sticky,
		}, up.attempt)
		require.NoError(t, err)
		return res.Candidate.ConnectionID
	}
	seq := func(h *harness, up *fakeUpstream, cs []Candidate, sticky, n int) []string {
		var got []string
		for range n {
			got = append(got, rr(h, up, "m1", cs, sticky))
		}
		return got
	}

	t.Run("sticky runs in priority order then least recently used", func(t *testing.T) {
		h := newHarness()
		up := newUpstream(nil)
		cs := []Candidate{{ConnectionID: "c", Priority: 3}, {ConnectionID: "a", Priority: 1}, {ConnectionID: "b", Priority: 2}}
		require.Equal(t, []string{"a", "a", "b", "b", "c", "c", "a", "a", "b"}, seq(h, up, cs, 2, 9))
	})

	t.Run("default sticky limit is 3", func(t *testing.T) {
		h := newHarness()
		up := newUpstream(nil)
		require.Equal(t, []string{"a", "a", "a", "b", "b", "b", "a"}, seq(h, up, cands("a", "b"), 0, 7))
	})

	t.Run("sticky limit 1 alternates", func(t *testing.T) {
		h := newHarness()
		up := newUpstream(nil)
		require.Equal(t, []string{"a", "b", "c", "a", "b"}, seq(h, up, cands("a", "b", "c"), 1, 5))
	})

	t.Run("state is per machine and provider", func(t *testing.T) {
		h := newHarness()
		up := newUpstream(nil)
		cs := cands("a", "b")
		require.Equal(t, "a", rr(h, up, "m1", cs, 1))
		require.Equal(t, "a", rr(h, up, "m2", cs, 1))
		require.Equal(t, "b", rr(h, up, "m1", cs, 1))
		require.Equal(t, "b", rr(h, up, "m2", cs, 1))
	})

	t.Run("cooling connection skipped, fallback starts its own run", func(t *testing.T) {
		h := newHarness()
		up := newUpstream(map[string]behaviour{"a": calls(nil, upErr(503, ""))})
		cs := cands("a", "b", "c")
		got := seq(h, up, cs, 3, 5)
		// a, a fails -> b, b, b, then c (a still cooling, c least recently used)
		require.Equal(t, []string{"a", "b", "b", "b", "c"}, got)
		require.Equal(t, 2, up.Calls("a"))
		h.clock.Advance(31 * time.Second)
		got = seq(h, up, cs, 3, 3)
		require.Equal(t, []string{"c", "c", "a"}, got)
	})

	t.Run("unknown strategy is fill-first", func(t *testing.T) {
		h := newHarness()
		up := newUpstream(nil)
		for range 5 {
			res, err := h.eng.Do(context.Background(), Request{Model: model, Candidates: cands("a", "b"), Strategy: "random"}, up.attempt)
			require.NoError(t, err)
			require.Equal(t, "a", res.Candidate.ConnectionID)
		}
	})
}

// A success clears the cooldown only when there was a record; the happy path
// never writes to the store.
func TestDoClearOnlyWhenNeeded(t *testing.T) {
	clock := newFakeClock()
	store := &countingCooldowns{Cooldowns: NewMemoryCooldowns(clock.Now, 0)}
	eng := New(store, WithClock(clock.Now))
	req := Request{Model: model, Candidates: cands("a", "b")}
	up := newUpstream(map[string]behaviour{"a": firstN(1, upErr(500, ""))})

	_, err := eng.Do(context.Background(), req, up.attempt) // a fails, b answers
	require.NoError(t, err)
	require.Equal(t, 1, store.puts)
	require.Zero(t, store.clear)

	clock.Advance(31 * time.Second)
	res, err := eng.Do(context.Background(), req, up.attempt) // a answers, clears its record
	require.NoError(t, err)
	require.Equal(t, "a", res.Candidate.ConnectionID)
	require.Equal(t, 1, store.clear)

	_, err = eng.Do(context.Background(), req, up.attempt)
	require.NoError(t, err)
	require.Equal(t, 1, store.clear, "no record, no Clear")
	require.Equal(t, 1, store.puts)
}

func TestDoCooldownsPerModel(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{"a": firstN(1, upErr(500, ""))})
	_, err := h.do(up, cands("a", "b"))
	require.NoError(t, err)
	res, err := h.eng.Do(context.Background(), Request{Model: "other-model", Candidates: cands("a", "b")}, up.attempt)
	require.NoError(t, err)
	require.Equal(t, "a", res.Candidate.ConnectionID, "the cooldown is for gpt-test only")
}

// errStore fails every write; the engine logs and carries on.
type errStore struct{ *MemoryCooldowns }

func (errStore) Put(context.Context, Cooldown) error { return errors.New("kv down") }

func TestDoStoreErrorsDoNotFailRequests(t *testing.T) {
	clock := newFakeClock()
	eng := New(errStore{NewMemoryCooldowns(clock.Now, 0)}, WithClock(clock.Now))
	up := newUpstream(map[string]behaviour{"a": always(upErr(429, "", "Retry-After", "4"))})
	res, err := eng.Do(context.Background(), Request{Model: model, Candidates: cands("a", "b")}, up.attempt)
	require.NoError(t, err)
	require.Equal(t, "b", res.Candidate.ConnectionID)

	_, err = eng.Do(context.Background(), Request{Model: model, Candidates: cands("a")}, up.attempt)
	require.Equal(t, 4*time.Second, exhausted(t, err).RetryAfter, "the outcome uses the computed cooldown")
}

func TestNewDefaults(t *testing.T) {
	eng := New(nil)
	up := newUpstream(map[string]behaviour{"a": always(upErr(500, ""))})
	res, err := eng.Do(context.Background(), Request{Model: model, Candidates: cands("a", "b")}, up.attempt)
	require.NoError(t, err)
	require.Equal(t, "b", res.Candidate.ConnectionID)
	res, err = eng.Do(context.Background(), Request{Model: model, Candidates: cands("a", "b")}, up.attempt)
	require.NoError(t, err)
	require.Equal(t, "b", res.Candidate.ConnectionID, "the private store remembers the cooldown")
	require.Equal(t, 1, up.Calls("a"))
}

// Many goroutines share an engine and a store (run with -race).
func TestDoConcurrent(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{
		"a": func(n int, _ Candidate) error {
			if n%3 == 0 {
				return upErr(429, "")
			}
			return nil
		},
		"b": func(n int, _ Candidate) error {
			if n%5 == 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		},
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				req := Request{
					MachineID: fmt.Sprintf("m%d", g%3), Provider: "openai", Model: model,
					Candidates: cands("a", "b", "c"), Strategy: StrategyRoundRobin,
				}
				if i%2 == 0 {
					req.Strategy = StrategyFillFirst
				}
				if _, err := h.eng.Do(context.Background(), req, up.attempt); err != nil {
					t.Errorf("Do: %v", err)
					return
				}
				if i%50 == 0 {
					h.clock.Advance(time.Minute)
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkDoHappyPath(b *testing.B) {
	store := NewMemoryCooldowns(nil, 0)
	eng := New(store)
	req := Request{
		MachineID: "0123456789abcdef", Provider: "openai", Model: "text-embedding-3-small",
		Candidates: []Candidate{
			{ConnectionID: "conn-3", Priority: 3},
			{ConnectionID: "conn-1", Priority: 1},
			{ConnectionID: "conn-2", Priority: 2},
		},
	}
	attempt := func(context.Context, Candidate) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Do(ctx, req, attempt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoHappyPathRoundRobin(b *testing.B) {
	eng := New(NewMemoryCooldowns(nil, 0))
	req := Request{
		MachineID: "0123456789abcdef", Provider: "openai", Model: "text-embedding-3-small",
		Candidates: cands("conn-1", "conn-2", "conn-3"), Strategy: StrategyRoundRobin,
	}
	attempt := func(context.Context, Candidate) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Do(ctx, req, attempt); err != nil {
			b.Fatal(err)
		}
	}
}

// Credentials all cooling for want of quota answer 429 insufficient_quota
// with the earliest end, not a rate limit; one rate limited among them
// makes it a rate limit again.
func TestDoAllOutOfQuota(t *testing.T) {
	h := newHarness()
	up := newUpstream(map[string]behaviour{
		"a": always(upErr(429, `{"error":{"code":"insufficient_quota"}}`, "Retry-After", "60")),
		"b": always(upErr(429, `{"error":{"code":"insufficient_quota"}}`, "Retry-After", "30")),
	})
	_, err := h.do(up, cands("a", "b"))
	require.Equal(t, CodeUpstreamError, exhausted(t, err).Code, "asked now: the provider's answer")

	_, err = h.do(up, cands("a", "b"))
	ex := exhausted(t, err)
	require.Equal(t, 429, ex.Status)
	require.Equal(t, CodeQuotaExceeded, ex.Code)
	require.Equal(t, 30*time.Second, ex.RetryAfter)
	require.Equal(t, "[openai/gpt-test] all credentials are out of quota (reset after 30s)", ex.Message)
	require.Equal(t, 1, up.Calls("a"))
	require.Equal(t, 1, up.Calls("b"))

	require.NoError(t, h.store.Put(context.Background(), Cooldown{ConnectionID: "b", Model: model,
		Until: h.clock.Now().Add(40 * time.Second), Level: 1, Reason: ReasonRateLimited, Status: 429}))
	_, err = h.do(up, cands("a", "b"))
	ex = exhausted(t, err)
	require.Equal(t, CodeRateLimited, ex.Code)
}
