package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

// benchInput is the text every request embeds.
const benchInput = "The quick brown fox jumps over the lazy dog"

// workload is one kind of request, sent to both targets.
type workload struct {
	name   string
	format string // encoding_format
}

// workloads are the measured workloads, in order.
func workloads() []workload {
	return []workload{
		{name: "embeddings-float", format: "float"},
		{name: "embeddings-base64", format: "base64"},
	}
}

// targets builds the direct and gateway targets of w.
func (f *fixture) targets(w workload) (direct, gateway *target, err error) {
	body := func(model string) ([]byte, error) {
		return json.Marshal(struct {
			Model          string `json:"model"`
			Input          string `json:"input"`
			EncodingFormat string `json:"encoding_format"`
		}{model, benchInput, w.format})
	}
	db, err := body(upstreamModel)
	if err != nil {
		return nil, nil, err
	}
	gb, err := body(gatewayModel)
	if err != nil {
		return nil, nil, err
	}
	direct = &target{name: "direct", url: f.upstream.URL() + "/embeddings", body: db, auth: []string{"Bearer " + upstreamKey}}
	gateway = &target{name: "gateway", url: f.gatewayURL + "/v1/embeddings", body: gb, auth: []string{"Bearer " + f.apiKey}, overhead: true}
	return direct, gateway, nil
}

// run starts the system, measures every workload and returns the report.
// Progress lines go to progress.
func run(ctx context.Context, o options, logger *slog.Logger, progress io.Writer) (rep *report, err error) {
	rep = newReport(o)
	f, err := startFixture(ctx, o.Dims, logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.close(); cerr != nil && err == nil {
			err = fmt.Errorf("stop the gateway: %w", cerr)
		}
	}()
	client := newLoadClient(o.Concurrency)
	defer client.CloseIdleConnections()
	pprof.Do(ctx, pprof.Labels(profileLabel, "client"), func(ctx context.Context) {
		err = measure(ctx, o, f, client, rep, progress)
	})
	if err != nil {
		return nil, err
	}
	rep.finish()
	return rep, nil
}

// measure probes, warms up and runs the rounds.
func measure(ctx context.Context, o options, f *fixture, client *http.Client, rep *report, progress io.Writer) error {
	type pair struct{ direct, gateway *target }
	ws := workloads()
	pairs := make([]pair, len(ws))
	for i, w := range ws {
		d, g, err := f.targets(w)
		if err != nil {
			return err
		}
		if err := probe(ctx, client, w, d, g, o.Dims); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		pairs[i] = pair{d, g}
		rep.Workloads = append(rep.Workloads, &workloadReport{Name: w.name, Format: w.format})
	}

	if o.Warmup > 0 {
		for _, p := range pairs {
			for _, tg := range []*target{p.direct, p.gateway} {
				closedLoop(ctx, client, tg, o.Concurrency, o.Warmup)
			}
		}
	}

	for r := range o.Rounds {
		for i, p := range pairs {
			wr := rep.Workloads[i]
			var rd roundReport
			// Interleaved: direct, gateway, direct, gateway.
			steps := []struct {
				name string
				tg   *target
				dst  *stats
				load func(*target) *phase
			}{
				{"saturation", p.direct, &rd.Direct.Saturation, func(tg *target) *phase { return closedLoop(ctx, client, tg, o.Concurrency, o.Duration) }},
				{"saturation", p.gateway, &rd.Gateway.Saturation, func(tg *target) *phase { return closedLoop(ctx, client, tg, o.Concurrency, o.Duration) }},
				{"fixed-rate", p.direct, &rd.Direct.Fixed, func(tg *target) *phase { return openLoop(ctx, client, tg, o.Rate, o.Duration) }},
				{"fixed-rate", p.gateway, &rd.Gateway.Fixed, func(tg *target) *phase { return openLoop(ctx, client, tg, o.Rate, o.Duration) }},
			}
			for _, s := range steps {
				runtime.GC() // start every phase with the same heap
				*s.dst = s.load(s.tg).stats(s.tg.overhead)
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("interrupted: %w", err)
				}
				fmt.Fprintf(progress, "round %d/%d %-17s %-7s %-10s %s\n", r+1, o.Rounds, wr.Name, s.tg.name, s.name, s.dst.brief())
			}
			wr.Rounds = append(wr.Rounds, rd)
		}
	}
	return nil
}

// probe checks once, before any load, that both targets answer the workload
// with vectors of dims floats and that the gateway's vectors are the
// upstream's. It waits (at most 10 s) for the new connection to reach the
// gateway's routing.
func probe(ctx context.Context, c *http.Client, w workload, direct, gateway *target, dims int) error {
	want, _, err := fetchEmbedding(ctx, c, direct)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	if err := checkVector(want, w.format, dims); err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		got, header, err := fetchEmbedding(ctx, c, gateway)
		if err == nil {
			if header.Get(overheadHeader) == "" {
				return fmt.Errorf("gateway: the answer has no %s header", overheadHeader)
			}
			if !bytes.Equal(got, want) {
				return errors.New("gateway: the vector differs from the upstream's")
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway: %w", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fetchEmbedding sends one request and returns the raw first embedding.
func fetchEmbedding(ctx context.Context, c *http.Client, tg *target) (json.RawMessage, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, bytes.NewReader(tg.body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header["Authorization"] = tg.auth
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(data[:min(len(data), errorSnippet)]))
	}
	var body struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, nil, fmt.Errorf("decode the answer: %w", err)
	}
	if len(body.Data) != 1 {
		return nil, nil, fmt.Errorf("%d embeddings in the answer, want 1", len(body.Data))
	}
	return body.Data[0].Embedding, resp.Header, nil
}

// checkVector checks that raw holds dims floats in the given format.
func checkVector(raw json.RawMessage, format string, dims int) error {
	switch format {
	case "base64":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("base64 embedding: %w", err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("base64 embedding: %w", err)
		}
		if len(b) != 4*dims {
			return fmt.Errorf("base64 embedding of %d bytes, want %d", len(b), 4*dims)
		}
	default:
		var v []float32
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("float embedding: %w", err)
		}
		if len(v) != dims {
			return fmt.Errorf("embedding of %d floats, want %d", len(v), dims)
		}
	}
	return nil
}

// loadAverage is the 1-minute load average, or "" where unknown.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}
