package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
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
	url      string // the embeddings URL
	body     []byte
	auth     []string // Authorization header value
	overhead bool     // whether answers must carry the overhead header
}

// sample is one answered request.
type sample struct {
	latency  time.Duration
	overhead int64 // microseconds; -1 when the header is absent
}

// phase collects the outcome of one load phase on one target.
type phase struct {
	mu         sync.Mutex
	samples    []sample // 2xx answers
	nonOK      int      // non-2xx answers
	failures   int      // transport errors (no answer)
	noOverhead int      // 2xx gateway answers without the overhead header
	dropped    int      // open loop: not sent, maxInFlight reached
	firstError string
	elapsed    time.Duration
	cpu        time.Duration // process CPU time used during the phase
	others     time.Duration // CPU time other processes used meanwhile; -1 unknown
}

func (p *phase) merge(s []sample, nonOK, failures, noOverhead int, firstError string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, s...)
	p.nonOK += nonOK
	p.failures += failures
	p.noOverhead += noOverhead
	if p.firstError == "" {
		p.firstError = firstError
	}
}

// tally is one goroutine's share of a phase, merged at its end.
type tally struct {
	samples    []sample
	nonOK      int
	failures   int
	noOverhead int
	firstError string
}

func (t *tally) fail(msg string) {
	if t.firstError == "" {
		t.firstError = msg
	}
}

// do sends one request and records its outcome.
func (tg *target) do(ctx context.Context, c *http.Client, t *tally) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, bytes.NewReader(tg.body))
	if err != nil {
		t.failures++
		t.fail(err.Error())
		return
	}
	req.Header = http.Header{
		"Content-Type":  {"application/json"},
		"Authorization": tg.auth,
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.failures++
		t.fail(err.Error())
		return
	}
	var snippet []byte
	if resp.StatusCode/100 != 2 {
		snippet, _ = io.ReadAll(io.LimitReader(resp.Body, errorSnippet))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	latency := time.Since(start)
	switch {
	case err != nil:
		t.failures++
		t.fail("reading the answer: " + err.Error())
		return
	case resp.StatusCode/100 != 2:
		t.nonOK++
		t.fail(fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(snippet)))
		return
	}
	s := sample{latency: latency, overhead: -1}
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

// closedLoop keeps concurrency requests in flight for d: each connection
// sends its next request when the previous one is answered. Requests started
// before d ends are waited for.
func closedLoop(ctx context.Context, c *http.Client, tg *target, concurrency int, d time.Duration) *phase {
	p := &phase{}
	ctx, cancel := context.WithTimeout(ctx, d+requestTimeout)
	defer cancel()
	cpu := sampleCPU()
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			t := tally{samples: make([]sample, 0, 4096)}
			for i := 0; i < maxPerWorker && ctx.Err() == nil && time.Now().Before(end); i++ {
				tg.do(ctx, c, &t)
			}
			p.merge(t.samples, t.nonOK, t.failures, t.noOverhead, t.firstError)
		})
	}
	wg.Wait()
	p.elapsed = time.Since(start)
	p.cpu, p.others = sampleCPU().since(cpu)
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
			p.merge(t.samples, t.nonOK, t.failures, t.noOverhead, t.firstError)
		})
	}
	inFlight.Wait()
	p.elapsed = time.Since(start)
	p.cpu, p.others = sampleCPU().since(cpu)
	p.dropped = int(dropped.Load())
	return p
}
