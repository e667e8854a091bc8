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
}

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
	Gateway summary `json:"gateway"`
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
	RPS             float64  `json:"requestsPerSecond"` // saturation
	SaturationP50Us float64  `json:"saturationP50Us"`
	SaturationP99Us float64  `json:"saturationP99Us"`
	CPUPerRequestUs float64  `json:"cpuPerRequestUs"` // saturation, whole process
	P50Us           float64  `json:"p50Us"`           // fixed rate
	P99Us           float64  `json:"p99Us"`
	TTFBP50Us       *float64 `json:"ttfbP50Us,omitempty"` // fixed rate, streams only
	TTFBP99Us       *float64 `json:"ttfbP99Us,omitempty"`
	OverheadP50Us   *float64 `json:"overheadP50Us,omitempty"` // fixed rate, gateway only
	OverheadP99Us   *float64 `json:"overheadP99Us,omitempty"`
	Failures        int      `json:"failures"` // over all rounds
}

type roundReport struct {
	Direct  targetRound `json:"direct"`
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
	CPUPerReqUs   float64  `json:"cpuPerRequestUs"`        // process CPU time over answered requests
	OthersPct     *float64 `json:"othersCpuPct,omitempty"` // CPU share other processes took meanwhile
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
		w.Gateway = summarize(w.Rounds, func(rr roundReport) targetRound { return rr.Gateway })
		// Ratios and differences are taken within each round (the two
		// targets ran back to back), then the median over rounds.
		w.ThroughputRatio = medianOf(w.Rounds, func(rr roundReport) float64 {
			if rr.Direct.Saturation.RPS == 0 {
				return 0
			}
			return rr.Gateway.Saturation.RPS / rr.Direct.Saturation.RPS
		})
		w.AddedP50Us = medianOf(w.Rounds, func(rr roundReport) float64 { return rr.Gateway.Fixed.P50Us - rr.Direct.Fixed.P50Us })
		w.AddedP99Us = medianOf(w.Rounds, func(rr roundReport) float64 { return rr.Gateway.Fixed.P99Us - rr.Direct.Fixed.P99Us })
		if w.Direct.TTFBP50Us != nil && w.Gateway.TTFBP50Us != nil {
			p50 := medianOf(w.Rounds, func(rr roundReport) float64 { return *rr.Gateway.Fixed.TTFBP50Us - *rr.Direct.Fixed.TTFBP50Us })
			p99 := medianOf(w.Rounds, func(rr roundReport) float64 { return *rr.Gateway.Fixed.TTFBP99Us - *rr.Direct.Fixed.TTFBP99Us })
			w.AddedTTFBP50Us, w.AddedTTFBP99Us = &p50, &p99
		}
		w.AddedCPUUs = medianOf(w.Rounds, func(rr roundReport) float64 {
			return rr.Gateway.Saturation.CPUPerReqUs - rr.Direct.Saturation.CPUPerReqUs
		})
		r.Failures += w.Direct.Failures + w.Gateway.Failures
		for _, rr := range w.Rounds {
			for _, s := range []stats{rr.Direct.Saturation, rr.Direct.Fixed, rr.Gateway.Saturation, rr.Gateway.Fixed} {
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
		P50Us:           get(func(t targetRound) float64 { return t.Fixed.P50Us }),
		P99Us:           get(func(t targetRound) float64 { return t.Fixed.P99Us }),
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
		}{{"direct", wr.Direct}, {"gateway", wr.Gateway}} {
			o50, o99 := "-", "-"
			if t.s.OverheadP50Us != nil {
				o50, o99 = fmtUs(*t.s.OverheadP50Us), fmtUs(*t.s.OverheadP99Us)
			}
			t50, t99 := "-", "-"
			if t.s.TTFBP50Us != nil {
				t50, t99 = fmtUs(*t.s.TTFBP50Us), fmtUs(*t.s.TTFBP99Us)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n",
				wr.Name, t.name, t.s.RPS, fmtUs(t.s.P50Us), fmtUs(t.s.P99Us), t50, t99, o50, o99, fmtUs(t.s.CPUPerRequestUs), t.s.Failures)
		}
		t50, t99 := "", ""
		if wr.AddedTTFBP50Us != nil {
			t50, t99 = signedUs(*wr.AddedTTFBP50Us), signedUs(*wr.AddedTTFBP99Us)
		}
		fmt.Fprintf(tw, "%s\tgateway/direct\t%sx\t%s\t%s\t%s\t%s\t\t\t%s\t\n",
			wr.Name, fmtRatio(wr.ThroughputRatio), signedUs(wr.AddedP50Us), signedUs(wr.AddedP99Us), t50, t99, signedUs(wr.AddedCPUUs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nreq/s: closed loop at saturation; p50/p99 (to the end of the answer), ttfb (streams: to the first data event)")
	fmt.Fprintln(w, "and overhead (X-Switchboard-Overhead-Us): open loop at the fixed rate;")
	fmt.Fprintln(w, "cpu/req: CPU time of the whole process (load client, fake upstream, and gateway) per request at saturation.")
	fmt.Fprintln(w, "gateway/direct: throughput ratio, added p50 and p99, added CPU per request (gateway minus direct, per round).")
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
