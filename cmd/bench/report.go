package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is the outcome of a run.
type report struct {
	Date        string `json:"date"`
	GoVersion   string `json:"goVersion"`
	Platform    string `json:"platform"`
	CPUs        int    `json:"cpus"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	LoadAvgFrom string `json:"loadAvgStart,omitempty"` // 1-minute load average before the run
	LoadAvgTo   string `json:"loadAvgEnd,omitempty"`   // and after it

	Settings  settings          `json:"settings"`
	Workloads []*workloadReport `json:"workloads"`

	// Failures counts requests without a good answer, over all rounds
	// and workloads: non-2xx, transport errors, gateway answers without
	// the overhead header, streams that do not end with data: [DONE].
	Failures int `json:"failures"`
	// Dropped counts open-loop requests not sent because maxInFlight
	// answers were pending (the target could not keep up with -rate).
	Dropped int `json:"dropped"`
	// Repeated counts rounds run again because other processes took more
	// than -max-others of the CPUs during one of their phases.
	Repeated int `json:"repeatedRounds"`
	// OthersMedianPct and OthersMaxPct are the share of the machine's CPU
	// time that other processes took during the measured phases (median
	// and worst phase), when the platform tells.
	OthersMedianPct *float64 `json:"othersCpuMedianPct,omitempty"`
	OthersMaxPct    *float64 `json:"othersCpuMaxPct,omitempty"`

	Gateway gatewayFigures `json:"gateway"`
	Proxy   proxyFigures   `json:"proxy"`
	Usage   usageCount     `json:"usage"`
}

// gatewayFigures are the gateway process's start-up and memory.
type gatewayFigures struct {
	ReadyMs     float64 `json:"readyMs"`     // exec to the line announcing its address
	ReadyHTTPMs float64 `json:"readyHttpMs"` // exec to the first 200 of /readyz
	RestMiB     float64 `json:"restMiB"`     // VmRSS a second after ready, nothing configured
	PeakMiB     float64 `json:"peakMiB"`     // VmHWM over the whole load (the largest of the workloads' peaks)
}

type proxyFigures struct {
	PeakMiB float64 `json:"peakMiB"`
}

// usageCount compares the usage events the gateway published (counted in
// its usage stream once it stopped) with the answered requests that record
// one.
type usageCount struct {
	Answered  int `json:"answered"`
	Published int `json:"published"`
	// Messages carried the published events (a message is one event or a
	// batch of them).
	Messages    int `json:"messages"`
	DeadLetters int `json:"deadLetters"`
	Lost        int `json:"lost"`
}

// bar is the target for a workload, against the bare proxy of the
// same run.
type bar struct {
	Throughput float64 `json:"throughputVsProxy"` // at least
	P50        float64 `json:"addedP50VsProxy"`   // at most (streams: to the first event)
	P99Us      float64 `json:"addedP99Us"`        // under
}

// bars are the targets by workload name (issue 14); a workload without one
// is measured, not judged.
var bars = map[string]bar{
	"chat":             {Throughput: 0.85, P50: 1.3, P99Us: 1000},
	"embeddings-float": {Throughput: 0.85, P50: 1.3, P99Us: 1000},
	"chat-stream":      {Throughput: 0.8, P50: 1.3, P99Us: 1500},
}

// peakBarMiB is the bound on the gateway's peak memory under load.
const peakBarMiB = 60

// noisyPct is the share of CPU taken by other processes above which a
// phase's figures are flagged as noisy.
const noisyPct = 10

type settings struct {
	DurationS   float64 `json:"phaseSeconds"`
	WarmupS     float64 `json:"warmupSeconds"`
	Rate        int     `json:"rate"`
	Concurrency int     `json:"concurrency"`
	Rounds      int     `json:"rounds"`
	Dims        int     `json:"dims"`
	MaxOthers   float64 `json:"maxOthersPct"`
	Quick       bool    `json:"quick"`
}

// workloadReport is one workload: medians over rounds, then every round.
type workloadReport struct {
	Name   string `json:"name"`
	Format string `json:"encodingFormat,omitempty"`
	// Rate is the fixed rate of this workload: -rate, or less for
	// workloads that cap it.
	Rate int `json:"rate"`
	// Note qualifies the figures (what the direct call is).
	Note string `json:"note,omitempty"`

	Direct  summary `json:"direct"`
	Proxy   summary `json:"proxy"`
	Gateway summary `json:"gateway"`

	// Against the bare proxy: gateway over proxy req/s; the gateway's
	// added p50 (streams: to the first event) over the proxy's; the
	// proxy's own added p50 and p99; gateway process CPU per request over
	// the proxy process's.
	ThroughputVsProxy float64 `json:"throughputVsProxy"`
	P50VsProxy        float64 `json:"addedP50VsProxy"`
	ProxyAddedP50Us   float64 `json:"proxyAddedP50Us"`
	ProxyAddedP99Us   float64 `json:"proxyAddedP99Us"`
	CPUVsProxy        float64 `json:"cpuVsProxy"`
	Bar               *bar    `json:"bar,omitempty"`
	Meets             *bool   `json:"meetsBar,omitempty"`
	// GatewayPeakMiB is the gateway's peak resident memory (VmHWM) during
	// this workload's rounds, where the platform lets it be reset (Linux),
	// and GatewayFromMiB what it held as that round began: the collector
	// and the kernel keep some of what earlier workloads used.
	GatewayPeakMiB *float64 `json:"gatewayPeakMiB,omitempty"`
	GatewayFromMiB *float64 `json:"gatewayPeakFromMiB,omitempty"`

	// ThroughputRatio is gateway req/s over direct req/s at saturation.
	ThroughputRatio float64 `json:"throughputRatio"`
	// AddedP50Us and AddedP99Us are gateway minus direct latency at the
	// fixed rate, in microseconds.
	AddedP50Us float64 `json:"addedP50Us"`
	AddedP99Us float64 `json:"addedP99Us"`
	// AddedTTFBP50Us and AddedTTFBP99Us are the same for the time to the
	// first data event of streams.
	AddedTTFBP50Us *float64 `json:"addedTtfbP50Us,omitempty"`
	AddedTTFBP99Us *float64 `json:"addedTtfbP99Us,omitempty"`
	// AddedCPUUs is the process CPU time per request at saturation, gateway
	// minus direct: what the gateway spends on a request (load client and
	// fake upstream are in both), in microseconds.
	AddedCPUUs float64 `json:"addedCpuPerRequestUs"`

	Rounds []roundReport `json:"rounds"`
}

// summary is one target of a workload, medians over rounds.
type summary struct {
	RPS             float64 `json:"requestsPerSecond"` // saturation
	SaturationP50Us float64 `json:"saturationP50Us"`
	SaturationP99Us float64 `json:"saturationP99Us"`
	CPUPerRequestUs float64 `json:"cpuPerRequestUs"` // saturation, whole process
	// TargetCPUPerReqUs is the CPU time per request of the target's own
	// process (proxy, gateway) at saturation.
	TargetCPUPerReqUs float64  `json:"targetCpuPerRequestUs"`
	P50Us             float64  `json:"p50Us"` // fixed rate
	P99Us             float64  `json:"p99Us"`
	TTFBP50Us         *float64 `json:"ttfbP50Us,omitempty"` // fixed rate, streams only
	TTFBP99Us         *float64 `json:"ttfbP99Us,omitempty"`
	OverheadP50Us     *float64 `json:"overheadP50Us,omitempty"` // fixed rate, gateway only
	OverheadP99Us     *float64 `json:"overheadP99Us,omitempty"`
	Failures          int      `json:"failures"` // over all rounds
}

type roundReport struct {
	Direct  targetRound `json:"direct"`
	Proxy   targetRound `json:"proxy"`
	Gateway targetRound `json:"gateway"`
}

type targetRound struct {
	Saturation stats `json:"saturation"`
	Fixed      stats `json:"fixedRate"`
}

// stats are the figures of one phase on one target.
type stats struct {
	Requests      int      `json:"requests"` // 2xx answers
	NonOK         int      `json:"non2xx"`
	Transport     int      `json:"transportErrors"`
	NoOverhead    int      `json:"missingOverheadHeader"`
	Invalid       int      `json:"incompleteStreams"` // 2xx streams without data: [DONE]
	Dropped       int      `json:"dropped"`
	FirstError    string   `json:"firstError,omitempty"`
	ElapsedS      float64  `json:"elapsedSeconds"`
	RPS           float64  `json:"requestsPerSecond"`
	CPUPerReqUs   float64  `json:"cpuPerRequestUs"`                 // process CPU time over answered requests
	TargetCPUUs   *float64 `json:"targetCpuPerRequestUs,omitempty"` // the target process's
	OthersPct     *float64 `json:"othersCpuPct,omitempty"`          // CPU share other processes took meanwhile
	P50Us         float64  `json:"p50Us"`
	P99Us         float64  `json:"p99Us"`
	TTFBP50Us     *float64 `json:"ttfbP50Us,omitempty"` // streams: to the first data event
	TTFBP99Us     *float64 `json:"ttfbP99Us,omitempty"`
	OverheadP50Us *float64 `json:"overheadP50Us,omitempty"`
	OverheadP99Us *float64 `json:"overheadP99Us,omitempty"`
	// Overheads counts answers that carried the overhead header.
	Overheads int `json:"overheadSamples"`
}

func (s stats) failed() int { return s.NonOK + s.Transport + s.NoOverhead + s.Invalid }

func (s stats) brief() string {
	b := fmt.Sprintf("%8.0f req/s  p50 %-8s p99 %-8s", s.RPS, fmtUs(s.P50Us), fmtUs(s.P99Us))
	if s.TTFBP50Us != nil {
		b += fmt.Sprintf(" ttfb p50 %-8s p99 %-8s", fmtUs(*s.TTFBP50Us), fmtUs(*s.TTFBP99Us))
	}
	if s.OverheadP50Us != nil {
		b += fmt.Sprintf(" overhead p50 %-8s p99 %-8s", fmtUs(*s.OverheadP50Us), fmtUs(*s.OverheadP99Us))
	}
	if s.TargetCPUUs != nil {
		b += fmt.Sprintf(" cpu/req %s", fmtUs(*s.TargetCPUUs))
	}
	if s.OthersPct != nil {
		b += fmt.Sprintf(" others %.0f%%", *s.OthersPct)
		if *s.OthersPct > noisyPct {
			b += " (noisy)"
		}
	}
	if n := s.failed(); n > 0 {
		b += fmt.Sprintf(" FAILED %d (%s)", n, s.FirstError)
	}
	if s.Dropped > 0 {
		b += fmt.Sprintf(" dropped %d", s.Dropped)
	}
	return b
}

// stats computes the figures of a finished phase on tg.
func (p *phase) stats(tg *target) stats {
	s := stats{
		Requests:   len(p.samples),
		NonOK:      p.nonOK,
		Transport:  p.failures,
		NoOverhead: p.noOverhead,
		Invalid:    p.invalid,
		Dropped:    p.dropped,
		FirstError: p.firstError,
		ElapsedS:   p.elapsed.Seconds(),
	}
	if p.elapsed > 0 {
		s.RPS = float64(len(p.samples)) / p.elapsed.Seconds()
	}
	if len(p.samples) > 0 {
		s.CPUPerReqUs = us(p.cpu) / float64(len(p.samples))
		if p.targetCPU >= 0 {
			v := us(p.targetCPU) / float64(len(p.samples))
			s.TargetCPUUs = &v
		}
	}
	if p.others >= 0 && p.elapsed > 0 {
		pct := 100 * p.others.Seconds() / (p.elapsed.Seconds() * float64(runtime.NumCPU()))
		s.OthersPct = &pct
	}
	lat := make([]time.Duration, len(p.samples))
	ovh := make([]int64, 0, len(p.samples))
	var ttfb []time.Duration
	for i, x := range p.samples {
		lat[i] = x.latency
		if x.overhead >= 0 {
			ovh = append(ovh, x.overhead)
		}
		if x.ttfb >= 0 {
			ttfb = append(ttfb, x.ttfb)
		}
	}
	slices.Sort(lat)
	s.P50Us = us(percentile(lat, 50))
	s.P99Us = us(percentile(lat, 99))
	if tg.stream && len(ttfb) > 0 {
		slices.Sort(ttfb)
		p50, p99 := us(percentile(ttfb, 50)), us(percentile(ttfb, 99))
		s.TTFBP50Us, s.TTFBP99Us = &p50, &p99
	}
	s.Overheads = len(ovh)
	if tg.overhead && len(ovh) > 0 {
		slices.Sort(ovh)
		p50, p99 := float64(percentile(ovh, 50)), float64(percentile(ovh, 99))
		s.OverheadP50Us, s.OverheadP99Us = &p50, &p99
	}
	return s
}

// percentile is the nearest-rank percentile of sorted values.
func percentile[T int64 | time.Duration](sorted []T, p int) T {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100 // ceil(n*p/100)
	return sorted[max(i, 1)-1]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianOf is the median over rounds of one figure.
func medianOf(rounds []roundReport, f func(roundReport) float64) float64 {
	xs := make([]float64, len(rounds))
	for i, r := range rounds {
		xs[i] = f(r)
	}
	return median(xs)
}

func newReport(o options) *report {
	return &report{
		Date:        time.Now().UTC().Format(time.RFC3339),
		GoVersion:   runtime.Version(),
		Platform:    runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:        runtime.NumCPU(),
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		LoadAvgFrom: loadAverage(),
		Settings: settings{
			DurationS:   o.Duration.Seconds(),
			WarmupS:     o.Warmup.Seconds(),
			Rate:        o.Rate,
			Concurrency: o.Concurrency,
			Rounds:      o.Rounds,
			Dims:        o.Dims,
			MaxOthers:   o.MaxOthers,
			Quick:       o.Quick,
		},
	}
}

// finish computes the medians, ratios and totals.
func (r *report) finish() {
	r.LoadAvgTo = loadAverage()
	var others []float64
	for _, w := range r.Workloads {
		w.Direct = summarize(w.Rounds, func(rr roundReport) targetRound { return rr.Direct })
		w.Proxy = summarize(w.Rounds, func(rr roundReport) targetRound { return rr.Proxy })
		w.Gateway = summarize(w.Rounds, func(rr roundReport) targetRound { return rr.Gateway })
		// Ratios and differences are taken within each round (the
		// targets ran back to back), then the median over rounds.
		ratio := func(a, b float64) float64 {
			if b == 0 {
				return 0
			}
			return a / b
		}
		w.ThroughputRatio = medianOf(w.Rounds, func(rr roundReport) float64 {
			return ratio(rr.Gateway.Saturation.RPS, rr.Direct.Saturation.RPS)
		})
		w.ThroughputVsProxy = medianOf(w.Rounds, func(rr roundReport) float64 {
			return ratio(rr.Gateway.Saturation.RPS, rr.Proxy.Saturation.RPS)
		})
		w.AddedP50Us = medianOf(w.Rounds, func(rr roundReport) float64 { return rr.Gateway.Fixed.P50Us - rr.Direct.Fixed.P50Us })
		w.AddedP99Us = medianOf(w.Rounds, func(rr roundReport) float64 { return rr.Gateway.Fixed.P99Us - rr.Direct.Fixed.P99Us })
		w.ProxyAddedP50Us = medianOf(w.Rounds, func(rr roundReport) float64 { return rr.Proxy.Fixed.P50Us - rr.Direct.Fixed.P50Us })
		w.ProxyAddedP99Us = medianOf(w.Rounds, func(rr roundReport) float64 { return rr.Proxy.Fixed.P99Us - rr.Direct.Fixed.P99Us })
		w.P50VsProxy = medianOf(w.Rounds, func(rr roundReport) float64 {
			return ratio(rr.Gateway.Fixed.P50Us-rr.Direct.Fixed.P50Us, rr.Proxy.Fixed.P50Us-rr.Direct.Fixed.P50Us)
		})
		p99 := w.AddedP99Us
		if w.Direct.TTFBP50Us != nil && w.Gateway.TTFBP50Us != nil && w.Proxy.TTFBP50Us != nil {
			p50 := medianOf(w.Rounds, func(rr roundReport) float64 { return *rr.Gateway.Fixed.TTFBP50Us - *rr.Direct.Fixed.TTFBP50Us })
			t99 := medianOf(w.Rounds, func(rr roundReport) float64 { return *rr.Gateway.Fixed.TTFBP99Us - *rr.Direct.Fixed.TTFBP99Us })
			w.AddedTTFBP50Us, w.AddedTTFBP99Us = &p50, &t99
			w.P50VsProxy = medianOf(w.Rounds, func(rr roundReport) float64 {
				return ratio(*rr.Gateway.Fixed.TTFBP50Us-*rr.Direct.Fixed.TTFBP50Us, *rr.Proxy.Fixed.TTFBP50Us-*rr.Direct.Fixed.TTFBP50Us)
			})
		}
		w.AddedCPUUs = medianOf(w.Rounds, func(rr roundReport) float64 {
			return rr.Gateway.Saturation.CPUPerReqUs - rr.Direct.Saturation.CPUPerReqUs
		})
		w.CPUVsProxy = ratio(w.Gateway.TargetCPUPerReqUs, w.Proxy.TargetCPUPerReqUs)
		if b, ok := bars[w.Name]; ok {
			meets := w.ThroughputVsProxy >= b.Throughput && w.P50VsProxy <= b.P50 && p99 < b.P99Us
			w.Bar, w.Meets = &b, &meets
		}
		r.Failures += w.Direct.Failures + w.Proxy.Failures + w.Gateway.Failures
		for _, rr := range w.Rounds {
			for _, s := range []stats{rr.Direct.Saturation, rr.Direct.Fixed, rr.Proxy.Saturation, rr.Proxy.Fixed, rr.Gateway.Saturation, rr.Gateway.Fixed} {
				r.Dropped += s.Dropped
				if s.OthersPct != nil {
					others = append(others, *s.OthersPct)
				}
			}
		}
	}
	if len(others) > 0 {
		m, x := median(others), slices.Max(others)
		r.OthersMedianPct, r.OthersMaxPct = &m, &x
	}
}

func summarize(rounds []roundReport, pick func(roundReport) targetRound) summary {
	get := func(f func(targetRound) float64) float64 {
		return medianOf(rounds, func(rr roundReport) float64 { return f(pick(rr)) })
	}
	s := summary{
		RPS:             get(func(t targetRound) float64 { return t.Saturation.RPS }),
		SaturationP50Us: get(func(t targetRound) float64 { return t.Saturation.P50Us }),
		SaturationP99Us: get(func(t targetRound) float64 { return t.Saturation.P99Us }),
		CPUPerRequestUs: get(func(t targetRound) float64 { return t.Saturation.CPUPerReqUs }),
		TargetCPUPerReqUs: get(func(t targetRound) float64 {
			if t.Saturation.TargetCPUUs == nil {
				return 0
			}
			return *t.Saturation.TargetCPUUs
		}),
		P50Us: get(func(t targetRound) float64 { return t.Fixed.P50Us }),
		P99Us: get(func(t targetRound) float64 { return t.Fixed.P99Us }),
	}
	hasOverhead, hasTTFB := len(rounds) > 0, len(rounds) > 0
	for _, rr := range rounds {
		t := pick(rr)
		s.Failures += t.Saturation.failed() + t.Fixed.failed()
		hasOverhead = hasOverhead && t.Fixed.OverheadP50Us != nil
		hasTTFB = hasTTFB && t.Fixed.TTFBP50Us != nil
	}
	if hasTTFB {
		p50 := get(func(t targetRound) float64 { return *t.Fixed.TTFBP50Us })
		p99 := get(func(t targetRound) float64 { return *t.Fixed.TTFBP99Us })
		s.TTFBP50Us, s.TTFBP99Us = &p50, &p99
	}
	if hasOverhead {
		p50 := get(func(t targetRound) float64 { return *t.Fixed.OverheadP50Us })
		p99 := get(func(t targetRound) float64 { return *t.Fixed.OverheadP99Us })
		s.OverheadP50Us, s.OverheadP99Us = &p50, &p99
	}
	return s
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeTable(w io.Writer) error {
	s := r.Settings
	fmt.Fprintf(w, "switchboard bench  %s  %s %s  %d CPUs, GOMAXPROCS %d  load avg %s -> %s\n",
		r.Date, r.GoVersion, r.Platform, r.CPUs, r.GOMAXPROCS, orDash(r.LoadAvgFrom), orDash(r.LoadAvgTo))
	fmt.Fprintf(w, "%d round(s) x %gs per phase; saturation: %d connections; fixed rate: %d req/s%s; %d dims; medians over rounds\n",
		s.Rounds, s.DurationS, s.Concurrency, s.Rate, r.cappedRates(), s.Dims)
	if r.OthersMaxPct != nil {
		fmt.Fprintf(w, "CPU taken by other processes during the phases: median %.0f%%, worst phase %.0f%%; %d disturbed round(s) repeated\n",
			*r.OthersMedianPct, *r.OthersMaxPct, r.Repeated)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\ttarget\treq/s\tp50\tp99\tttfb p50\tttfb p99\toverhead p50\toverhead p99\tcpu/req\tfailed")
	for _, wr := range r.Workloads {
		for _, t := range []struct {
			name string
			s    summary
		}{{"direct", wr.Direct}, {"proxy", wr.Proxy}, {"gateway", wr.Gateway}} {
			o50, o99 := "-", "-"
			if t.s.OverheadP50Us != nil {
				o50, o99 = fmtUs(*t.s.OverheadP50Us), fmtUs(*t.s.OverheadP99Us)
			}
			t50, t99 := "-", "-"
			if t.s.TTFBP50Us != nil {
				t50, t99 = fmtUs(*t.s.TTFBP50Us), fmtUs(*t.s.TTFBP99Us)
			}
			cpu := "-"
			if t.name != "direct" {
				cpu = fmtUs(t.s.TargetCPUPerReqUs)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n",
				wr.Name, t.name, t.s.RPS, fmtUs(t.s.P50Us), fmtUs(t.s.P99Us), t50, t99, o50, o99, cpu, t.s.Failures)
		}
		t50, t99 := "", ""
		if wr.AddedTTFBP50Us != nil {
			t50, t99 = signedUs(*wr.AddedTTFBP50Us), signedUs(*wr.AddedTTFBP99Us)
		}
		fmt.Fprintf(tw, "%s\tgateway/direct\t%sx\t%s\t%s\t%s\t%s\t\t\t\t\n",
			wr.Name, fmtRatio(wr.ThroughputRatio), signedUs(wr.AddedP50Us), signedUs(wr.AddedP99Us), t50, t99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nagainst the bare reverse proxy (issue 14's bars in brackets):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\treq/s vs proxy\tadded p50 proxy / gateway\tratio\tadded p99 proxy / gateway\tcpu/req proxy / gateway\tgateway peak\tmeets")
	for _, wr := range r.Workloads {
		b := bar{}
		if wr.Bar != nil {
			b = *wr.Bar
		}
		pp50, gp50, gp99 := wr.ProxyAddedP50Us, wr.AddedP50Us, wr.AddedP99Us
		if wr.AddedTTFBP50Us != nil {
			gp50 = *wr.AddedTTFBP50Us
			pp50 = medianOf(wr.Rounds, func(rr roundReport) float64 { return *rr.Proxy.Fixed.TTFBP50Us - *rr.Direct.Fixed.TTFBP50Us })
		}
		meets := "-"
		if wr.Meets != nil {
			meets = map[bool]string{true: "yes", false: "NO"}[*wr.Meets]
		}
		peak := "-"
		if wr.GatewayPeakMiB != nil {
			peak = fmt.Sprintf("%.1f MiB (from %.1f)", *wr.GatewayPeakMiB, *wr.GatewayFromMiB)
		}
		fmt.Fprintf(tw, "%s\t%sx%s\t%s / %s\t%sx%s\t%s / %s%s\t%s / %s (%sx)\t%s\t%s\n", wr.Name,
			fmtRatio(wr.ThroughputVsProxy), barStr(b.Throughput, ">="),
			signedUs(pp50), signedUs(gp50), fmtRatio(wr.P50VsProxy), barStr(b.P50, "<="),
			signedUs(wr.ProxyAddedP99Us), signedUs(gp99), barUs(b.P99Us),
			fmtUs(wr.Proxy.TargetCPUPerReqUs), fmtUs(wr.Gateway.TargetCPUPerReqUs), fmtRatio(wr.CPUVsProxy), peak, meets)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	g := r.Gateway
	fmt.Fprintf(w, "gateway: ready %.0f ms after exec (/readyz 200 at %.0f ms) [< 100 ms]; %.1f MiB at rest [< 40]; peak %.1f MiB under load [<= %d] (proxy peak %.1f MiB)\n",
		g.ReadyMs, g.ReadyHTTPMs, g.RestMiB, g.PeakMiB, peakBarMiB, r.Proxy.PeakMiB)
	u := r.Usage
	fmt.Fprintf(w, "usage events: %d answered requests that record one, %d published (in %d messages), %d dead-lettered, %d lost\n",
		u.Answered, u.Published, u.Messages, u.DeadLetters, u.Lost)
	fmt.Fprintln(w, "\nreq/s: closed loop at saturation; p50/p99 (to the end of the answer), ttfb (streams: to the first data event)")
	fmt.Fprintln(w, "and overhead (X-Switchboard-Overhead-Us): open loop at the fixed rate;")
	fmt.Fprintln(w, "cpu/req: CPU time (/proc utime+stime) of the proxy or gateway process per request at saturation.")
	fmt.Fprintln(w, "gateway/direct: throughput ratio, added p50 and p99 (gateway minus direct, per round).")
	fmt.Fprintln(w, "gateway peak: VmHWM during the workload's rounds, reset as each began (from: VmRSS then, partly kept from earlier workloads).")
	for _, wr := range r.Workloads {
		if wr.Note != "" {
			fmt.Fprintln(w, wr.Note+".")
		}
	}
	if r.OthersMaxPct != nil && *r.OthersMaxPct > noisyPct {
		fmt.Fprintf(w, "WARNING: other processes took up to %.0f%% of the CPUs during a phase; the figures are noisy (rerun on a quiet machine).\n", *r.OthersMaxPct)
	}
	if r.Dropped > 0 {
		fmt.Fprintf(w, "WARNING: %d fixed-rate requests were not sent: %d answers were already pending (the target could not keep up).\n", r.Dropped, maxInFlight)
	}
	if r.Failures > 0 {
		fmt.Fprintf(w, "FAILED: %d requests did not get a good answer:\n", r.Failures)
		for _, wr := range r.Workloads {
			for i, rr := range wr.Rounds {
				for _, x := range []struct {
					name string
					s    stats
				}{
					{"direct saturation", rr.Direct.Saturation}, {"direct fixed-rate", rr.Direct.Fixed},
					{"proxy saturation", rr.Proxy.Saturation}, {"proxy fixed-rate", rr.Proxy.Fixed},
					{"gateway saturation", rr.Gateway.Saturation}, {"gateway fixed-rate", rr.Gateway.Fixed},
				} {
					if n := x.s.failed(); n > 0 {
						fmt.Fprintf(w, "  %s round %d %s: %d non-2xx, %d transport errors, %d without %s, %d incomplete streams; first: %s\n",
							wr.Name, i+1, x.name, x.s.NonOK, x.s.Transport, x.s.NoOverhead, overheadHeader, x.s.Invalid, x.s.FirstError)
					}
				}
			}
		}
	} else {
		fmt.Fprintln(w, "every request got a 2xx answer.")
	}
	return nil
}

// cappedRates lists the workloads whose fixed rate is below -rate, e.g.
// " (models: 200 req/s)".
func (r *report) cappedRates() string {
	var capped []string
	for _, wr := range r.Workloads {
		if wr.Rate != r.Settings.Rate {
			capped = append(capped, fmt.Sprintf("%s: %d req/s", wr.Name, wr.Rate))
		}
	}
	if len(capped) == 0 {
		return ""
	}
	return " (" + strings.Join(capped, ", ") + ")"
}

// fmtRatio formats a ratio with two significant decimals below 0.1
// ("0.27", "0.0025").
func fmtRatio(v float64) string {
	if v >= 0.1 || v == 0 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

// fmtUs formats microseconds: "412us", "1.93ms".
func fmtUs(v float64) string {
	if v < 10_000 && v > -10_000 {
		if v < 1_000 && v > -1_000 {
			return strconv.FormatFloat(v, 'f', 0, 64) + "us"
		}
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(v/1000, 'f', 1, 64) + "ms"
}

func signedUs(v float64) string {
	if v >= 0 {
		return "+" + fmtUs(v)
	}
	return fmtUs(v)
}

func orDash(s string) string { return cmp.Or(strings.TrimSpace(s), "-") }

func barStr(v float64, op string) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf(" [%s %g]", op, v)
}

func barUs(v float64) string {
	if v == 0 {
		return ""
	}
	return " [< " + fmtUs(v) + "]"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(kb int64) float64 { return float64(kb) / 1024 }

// ptrOr is *p, or 0 for nil.
func ptrOr(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
