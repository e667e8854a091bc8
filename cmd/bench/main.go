// Command bench measures what the gateway adds to a request, beside what a
// bare reverse proxy adds. It starts a fake OpenAI upstream in this process
// (with the load client), a bare httputil.ReverseProxy in front of it (this
// program re-executed in the proxy role, a process of its own) and the
// gateway (the switchboard binary, built with `go build` unless -serve-bin
// names one, running `serve` with a temporary data directory), then drives
// the same workloads at the upstream directly, through the proxy and through
// the gateway, in interleaved rounds. The workloads are embeddings (float
// and base64, 1,536 floats), chat completions, streamed chat completions (20
// chunks, also timed to their first data event; a stream that does not end
// with data: [DONE] is a failure), and GET /v1/models of a second machine
// with 100 connections and 5,000 models (whose direct counterpart, the fake's
// own short list, is only a floor). Each workload has:
//
//   - a closed-loop saturation phase (-concurrency connections for
//     -duration) gives requests per second, and the CPU time per request
//     of the proxy's and the gateway's processes (/proc utime+stime);
//   - an open-loop phase at a fixed -rate (for -duration; the models
//     workload caps it at 20 req/s) gives p50 and p99 latency (and for
//     streams to the first event), and for the gateway the p50 and p99 of
//     its own added time as it reports it in X-Switchboard-Overhead-Us.
//
// Figures are medians over rounds; the gateway is judged by ratios against the
// proxy of the same run (throughput ratio, added p50 over the proxy's, added
// p99) against issue 14's bars, never by absolute times. The run also
// reports the gateway's time from exec to ready, its resident memory at rest
// and its peak (VmHWM), and counts the usage events it published (in its
// usage stream, once it stopped) against the answered requests that record
// one. Every request without a good answer (not 2xx, no overhead header from
// the gateway, a stream cut short) and every lost usage event is reported,
// and makes the program exit with status 1.
//
//	go run ./cmd/bench                   # 2 rounds of 4 s per phase: about 5 minutes
//	go run ./cmd/bench -quick            # a few seconds, for CI smoke
//	go run ./cmd/bench -json > out.json  # machine-readable
//	go run ./cmd/bench -cpuprofile cpu.out -heapprofile heap.out -allocprofile allocs.out -gctrace gc.txt
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the settings of a run.
type options struct {
	Duration    time.Duration // of each measured phase
	Warmup      time.Duration // per workload and target, before the first round
	Rate        int           // open-loop requests per second
	Concurrency int           // closed-loop connections
	Rounds      int
	Dims        int
	Quick       bool
	// Only names the workloads to run; empty: all.
	Only []string
	// MaxOthers is the share of CPU (percent) other processes may take
	// during a phase before its round is repeated (at most Rounds
	// repeats in all); 100 never repeats.
	MaxOthers float64
}

// defaultOptions is a full run: about six minutes.
func defaultOptions() options {
	return options{
		Duration:    3 * time.Second,
		Warmup:      time.Second,
		Rate:        1000,
		Concurrency: 32,
		Rounds:      2,
		Dims:        1536,
		MaxOthers:   10,
	}
}

// quickOptions is a smoke run of one to two seconds of load.
func quickOptions() options {
	return options{
		Duration:    150 * time.Millisecond,
		Warmup:      50 * time.Millisecond,
		Rate:        500,
		Concurrency: 8,
		Rounds:      1,
		Dims:        1536,
		MaxOthers:   100, // phases are too short to judge
		Quick:       true,
	}
}

func (o options) validate() error {
	var errs []error
	if o.Duration <= 0 || o.Duration > 10*time.Minute {
		errs = append(errs, errors.New("-duration must be in (0, 10m]"))
	}
	if o.Warmup < 0 || o.Warmup > time.Minute {
		errs = append(errs, errors.New("-warmup must be in [0, 1m]"))
	}
	if o.Rate < 1 || o.Rate > 100_000 {
		errs = append(errs, errors.New("-rate must be in [1, 100000]"))
	}
	if o.Concurrency < 1 || o.Concurrency > 1024 {
		errs = append(errs, errors.New("-concurrency must be in [1, 1024]"))
	}
	if o.Rounds < 1 || o.Rounds > 100 {
		errs = append(errs, errors.New("-rounds must be in [1, 100]"))
	}
	if o.MaxOthers < 0 || o.MaxOthers > 100 {
		errs = append(errs, errors.New("-max-others must be in [0, 100]"))
	}
	if o.Dims < 1 || o.Dims > 16384 {
		errs = append(errs, errors.New("-dims must be in [1, 16384]"))
	}
	for _, name := range o.Only {
		if !slices.Contains(workloadNames(), name) {
			errs = append(errs, fmt.Errorf("-workloads: no workload %q", name))
		}
	}
	return errors.Join(errs...)
}

// Exit statuses.
const (
	exitOK     = 0
	exitErrors = 1 // the run completed but some requests failed
	exitSetup  = 2 // bad flags, or the run could not be made
)

func main() {
	if code, ran := runRole(); ran {
		os.Exit(code)
	}
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := defaultOptions()
	var o options
	fs.DurationVar(&o.Duration, "duration", def.Duration, "length of each measured phase (saturation and fixed rate, per target, per round)")
	fs.DurationVar(&o.Warmup, "warmup", def.Warmup, "closed-loop warm-up per workload and target before the first round")
	fs.IntVar(&o.Rate, "rate", def.Rate, "open-loop requests per second")
	fs.IntVar(&o.Concurrency, "concurrency", def.Concurrency, "closed-loop concurrent connections")
	fs.IntVar(&o.Rounds, "rounds", def.Rounds, "interleaved rounds (figures are medians over rounds)")
	fs.IntVar(&o.Dims, "dims", def.Dims, "embedding vector length served by the fake upstream")
	fs.Float64Var(&o.MaxOthers, "max-others", def.MaxOthers, "repeat a round when other processes took more than this percentage of the CPUs during one of its phases (at most -rounds repeats; 100: never)")
	fs.BoolVar(&o.Quick, "quick", false, "smoke run of a few seconds (explicit flags still win)")
	only := fs.String("workloads", "", "comma-separated workloads to run (default: all): "+strings.Join(workloadNames(), ", "))
	asJSON := fs.Bool("json", false, "print the report as JSON")
	verbose := fs.Bool("v", false, "log the gateway's warnings and errors to stderr")
	var fo fixtureOptions
	fs.StringVar(&fo.serveBin, "serve-bin", "", "the switchboard binary to run as the gateway (default: `go build` one into a temporary directory)")
	fs.StringVar(&fo.cpuProfile, "cpuprofile", "", "write a CPU profile of the gateway process's whole life to this file")
	fs.StringVar(&fo.heapProfile, "heapprofile", "", "write the gateway's heap profile (in use, at the end of the load) to this file")
	fs.StringVar(&fo.allocProfile, "allocprofile", "", "write the gateway's allocation profile (everything allocated since it started) to this file")
	fs.StringVar(&fo.gcTrace, "gctrace", "", "run the gateway with GODEBUG=gctrace=1 and write its standard error to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitSetup
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return exitSetup
	}
	if o.Quick {
		// Quick settings fill in what was not set explicitly.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		q := quickOptions()
		if !set["duration"] {
			o.Duration = q.Duration
		}
		if !set["warmup"] {
			o.Warmup = q.Warmup
		}
		if !set["rate"] {
			o.Rate = q.Rate
		}
		if !set["concurrency"] {
			o.Concurrency = q.Concurrency
		}
		if !set["rounds"] {
			o.Rounds = q.Rounds
		}
		if !set["max-others"] {
			o.MaxOthers = q.MaxOthers
		}
	}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitSetup
	}

	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *verbose {
		fo.stderr = stderr
	}
	rep, err := run(ctx, o, fo, logger, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitSetup
	}
	if *asJSON {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return exitSetup
	}
	if n := rep.Usage.Lost; n > 0 {
		fmt.Fprintf(stderr, "bench: FAILED: %d usage events lost\n", n)
		return exitErrors
	}
	if n := rep.Failures; n > 0 {
		fmt.Fprintf(stderr, "bench: FAILED: %d requests did not get a good answer (see the report)\n", n)
		return exitErrors
	}
	return exitOK
}
