package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds that keep every loop finite whatever the flags.
const (
	// maxInFlight caps open-loop requests waiting for an answer; a request
	// due while the cap is reached is dropped and counted.
	maxInFlight = 256
	// maxPerWorker caps the requests of one closed-loop connection in one
	// phase (a guard against a runaway loop, far above what a phase makes).
	maxPerWorker = 1 << 22
	// requestTimeout bounds one request.
	requestTimeout = 10 * time.Second
	// errorSnippet is how much of a failed answer is kept for the report.
	errorSnippet = 300
	// maxAnswer bounds a streamed answer read whole, and the probe's
	// answers.
	maxAnswer = 64 << 20
)

// overheadHeader is edge.OverheadHeader (the bench reads it as a client
// would, without importing the edge).
const overheadHeader = "X-Switchboard-Overhead-Us"

// newLoadClient returns the one client every load phase uses: keep-alive,
// enough idle connections per host for the closed loop and the open loop's
// cap, no proxy (loopback only), no compression.
func newLoadClient(concurrency int) *http.Client {
	idle := max(concurrency, maxInFlight)
	return &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        4 * idle,
			MaxIdleConnsPerHost: idle,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// target is one endpoint under load with its request.
type target struct {
	name     string // "direct" or "gateway"
	method   string
	url      string
	body     []byte      // nil: no body
	header   http.Header // sent with every request (cloned per request)
	overhead bool        // whether answers must carry the overhead header
	// stream: the answer is a server-sent event stream; the time to its
	// first "data:" event is measured, and a stream that does not end
	// with "data: [DONE]" is a failure.
	stream bool
	// whole, when set, replaces the [DONE] check for dialects whose
	// streams end otherwise (Messages, Responses).
	whole func(stream []byte) bool
	// pid is the process serving the target, whose CPU time per request
	// is measured (0: none of its own, the fake in this process).
	pid int
}

// via is tg sent through another server: the same request with base (the
// start of tg's URL) replaced by to.
func (tg *target) via(name, base, to string) *target {
	c := *tg
	c.name = name
	c.url = to + strings.TrimPrefix(tg.url, base)
	c.header = tg.header.Clone()
	return &c
}

// newTarget builds a target; body nil means none. Requests with a body are
// sent as JSON.
func newTarget(name, method, url string, body []byte, header ...string) *target {
	h := http.Header{}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &target{name: name, method: method, url: url, body: body, header: h}
}

// request builds one request of the target.
func (tg *target) request(ctx context.Context) (*http.Request, error) {
	var body io.Reader = http.NoBody
	if tg.body != nil {
		body = bytes.NewReader(tg.body)
	}
	req, err := http.NewRequestWithContext(ctx, tg.method, tg.url, body)
	if err != nil {
		return nil, err
	}
	req.Header = tg.header.Clone()
	return req, nil
}

// sample is one answered request.
type sample struct {
	latency  time.Duration // to the end of the answer
	ttfb     time.Duration // streams: to the first data event; -1 otherwise
	overhead int64         // microseconds; -1 when the header is absent
}

// phase collects the outcome of one load phase on one target.
type phase struct {
	mu         sync.Mutex
	samples    []sample // good 2xx answers
	nonOK      int      // non-2xx answers
	failures   int      // transport errors (no answer)
	noOverhead int      // 2xx gateway answers without the overhead header
	invalid    int      // 2xx answers that are not whole (a stream without [DONE])
	dropped    int      // open loop: not sent, maxInFlight reached
	firstError string
	elapsed    time.Duration
	cpu        time.Duration // process CPU time used during the phase
	targetCPU  time.Duration // CPU time of the target's process; -1 unknown
	others     time.Duration // CPU time other processes used meanwhile; -1 unknown
}

func (p *phase) merge(t *tally) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, t.samples...)
	p.nonOK += t.nonOK
	p.failures += t.failures
	p.noOverhead += t.noOverhead
	p.invalid += t.invalid
	if p.firstError == "" {
		p.firstError = t.firstError
	}
}

// tally is one goroutine's share of a phase, merged at its end.
type tally struct {
	samples    []sample
	nonOK      int
	failures   int
	noOverhead int
	invalid    int
	firstError string
	buf        []byte // streams: the answer being read, reused
}

func (t *tally) fail(msg string) {
	if t.firstError == "" {
		t.firstError = msg
	}
}

// sseData starts a server-sent data event; streamEnd ends an OpenAI stream.
var (
	sseData   = []byte("data:")
	streamEnd = []byte("data: [DONE]")
)

// do sends one request and records its outcome.
func (tg *target) do(ctx context.Context, c *http.Client, t *tally) {
	req, err := tg.request(ctx)
	if err != nil {
		t.failures++
		t.fail(err.Error())
		return
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.failures++
		t.fail(err.Error())
		return
	}
	s := sample{ttfb: -1, overhead: -1}
	var snippet []byte
	switch {
	case resp.StatusCode/100 != 2:
		snippet, _ = io.ReadAll(io.LimitReader(resp.Body, errorSnippet))
		_, err = io.Copy(io.Discard, resp.Body)
	case tg.stream:
		t.buf, s.ttfb, err = readStream(resp.Body, t.buf[:0], start)
	default:
		_, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	s.latency = time.Since(start)
	switch {
	case err != nil:
		t.failures++
		t.fail("reading the answer: " + err.Error())
		return
	case resp.StatusCode/100 != 2:
		t.nonOK++
		t.fail(fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(snippet)))
		return
	case tg.stream && tg.whole != nil && !tg.whole(t.buf):
		t.invalid++
		tail := t.buf[max(len(t.buf)-errorSnippet, 0):]
		t.fail(fmt.Sprintf("a stream that does not end whole: ...%s", bytes.TrimSpace(tail)))
		return
	case tg.stream && tg.whole == nil && !bytes.HasSuffix(bytes.TrimRight(t.buf, "\r\n"), streamEnd):
		t.invalid++
		tail := t.buf[max(len(t.buf)-errorSnippet, 0):]
		t.fail(fmt.Sprintf("a stream that does not end with %s: ...%s", streamEnd, bytes.TrimSpace(tail)))
		return
	}
	if v := resp.Header.Get(overheadHeader); v != "" {
		if us, err := strconv.ParseInt(v, 10, 64); err == nil {
			s.overhead = us
		}
	}
	if tg.overhead && s.overhead < 0 {
		t.noOverhead++
		t.fail("a 2xx answer without " + overheadHeader)
	}
	t.samples = append(t.samples, s)
}

// readStream reads a whole event stream into buf and returns it with the
// time from start to the first data event (-1 if there was none).
func readStream(r io.Reader, buf []byte, start time.Time) ([]byte, time.Duration, error) {
	ttfb := time.Duration(-1)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if ttfb < 0 && n > 0 && bytes.Contains(buf, sseData) {
			ttfb = time.Since(start)
		}
		if err == io.EOF {
			return buf, ttfb, nil
		}
		if err != nil {
			return buf, ttfb, err
		}
		if len(buf) > maxAnswer {
			return buf, ttfb, fmt.Errorf("a stream of more than %d bytes", maxAnswer)
		}
	}
}

// closedLoop keeps concurrency requests in flight for d: each connection
// sends its next request when the previous one is answered. Requests started
// before d ends are waited for.
func closedLoop(ctx context.Context, c *http.Client, tg *target, concurrency int, d time.Duration) *phase {
	p := &phase{}
	ctx, cancel := context.WithTimeout(ctx, d+requestTimeout)
	defer cancel()
	cpu := sampleCPU()
	before, known := targetCPU(tg)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			t := tally{samples: make([]sample, 0, 4096)}
			for i := 0; i < maxPerWorker && ctx.Err() == nil && time.Now().Before(end); i++ {
				tg.do(ctx, c, &t)
			}
			p.merge(&t)
		})
	}
	wg.Wait()
	p.elapsed = time.Since(start)
	p.cpu, p.others = sampleCPU().since(cpu)
	p.targetCPU = -1
	if after, ok := targetCPU(tg); ok && known {
		p.targetCPU = after - before
		// The target's process is another one: its CPU time counts as
		// competition in the machine's busy time, not as others'.
		if p.others >= 0 {
			p.others = max(p.others-p.targetCPU, 0)
		}
	}
	return p
}

// openLoop sends rate requests per second for d, on schedule whether or not
// earlier ones were answered (at most maxInFlight wait at once), then waits
// for the answers.
func openLoop(ctx context.Context, c *http.Client, tg *target, rate int, d time.Duration) *phase {
	p := &phase{}
	ctx, cancel := context.WithTimeout(ctx, d+requestTimeout)
	defer cancel()
	total := int(float64(rate) * d.Seconds())
	total = max(total, 1)
	interval := time.Second / time.Duration(rate)
	slots := make(chan struct{}, maxInFlight)
	var inFlight sync.WaitGroup
	var dropped atomic.Int64
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	cpu := sampleCPU()
	before, known := targetCPU(tg)
	start := time.Now()
	for i := 0; i < total && ctx.Err() == nil; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			dropped.Add(1)
			continue
		}
		inFlight.Go(func() {
			defer func() { <-slots }()
			var t tally
			tg.do(ctx, c, &t)
			p.merge(&t)
		})
	}
	inFlight.Wait()
	p.elapsed = time.Since(start)
	p.cpu, p.others = sampleCPU().since(cpu)
	p.targetCPU = -1
	if after, ok := targetCPU(tg); ok && known {
		p.targetCPU = after - before
		// The target's process is another one: its CPU time counts as
		// competition in the machine's busy time, not as others'.
		if p.others >= 0 {
			p.others = max(p.others-p.targetCPU, 0)
		}
	}
	p.dropped = int(dropped.Load())
	return p
}

// targetCPU is the CPU time the process serving tg has used so far.
func targetCPU(tg *target) (time.Duration, bool) {
	if tg.pid == 0 {
		return 0, false
	}
	st, ok := readProc(tg.pid)
	return st.cpu, ok
}
