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
	"slices"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
)

// benchInput is the text every request embeds, and the user message of
// every chat request.
const benchInput = "The quick brown fox jumps over the lazy dog"

// streamInput is the user message of streamed chat: the fake streams a role
// chunk, one chunk per word of "echo: " and the message (18) and a finish
// chunk, 20 chunks in all.
const streamInput = "The quick brown fox jumps over the lazy dog and then the dog sleeps under the tree"

// workload is one kind of request, sent to both targets.
type workload struct {
	name   string
	format string // embeddings: encoding_format
	// note qualifies the workload's figures in the report.
	note string
	// maxRate caps the fixed rate of this workload (0: -rate as given),
	// for requests too heavy to be sent at -rate without measuring a
	// queue instead of a request.
	maxRate int
	// usage: every answered gateway request of this workload records one
	// usage event (counted against the events published at the end).
	usage bool
	// targets builds the direct and gateway targets; the proxy's is the
	// direct one sent through the proxy.
	targets func(f *fixture) (direct, gateway *target, err error)
	// check judges a probe's 2xx answer body; for the gateway's answer,
	// direct is the direct answer to compare it with (nil when judging
	// the direct answer itself).
	check func(body, direct []byte) error
}

// rate is the fixed rate of w under the options o.
func (w workload) rate(o options) int {
	if w.maxRate > 0 {
		return min(o.Rate, w.maxRate)
	}
	return o.Rate
}

// workloads are the measured workloads, in order. A new dialect (Anthropic
// Messages, OpenAI Responses; pass-through and translated) is one more
// workload here: its direct target is the fake's own route for it, its
// gateway target the gateway's route, check judges an answer, usage says
// whether it records a usage event, and bars (in report.go, by name) holds
// the targets for it. Proxy, figures, ratios and the report follow.
func workloads(dims int) []workload {
	return allWorkloads(dims)
}

// workloadNames are the names of every workload, in order.
func workloadNames() []string {
	var names []string
	for _, w := range allWorkloads(1) {
		names = append(names, w.name)
	}
	return names
}

// selected are the workloads o runs.
func selected(o options) []workload {
	ws := workloads(o.Dims)
	if len(o.Only) == 0 {
		return ws
	}
	return slices.DeleteFunc(ws, func(w workload) bool { return !slices.Contains(o.Only, w.name) })
}

func allWorkloads(dims int) []workload {
	return []workload{
		embeddingsWorkload("float", dims),
		embeddingsWorkload("base64", dims),
		chatWorkload(false),
		chatWorkload(true),
		messagesWorkload(false),
		messagesWorkload(true),
		responsesWorkload(false),
		responsesWorkload(true),
		modelsWorkload(),
	}
}

// jsonBody encodes v, for request bodies built once.
func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and strings: cannot fail
	}
	return b
}

// embeddingsWorkload is POST /v1/embeddings of benchInput in format.
func embeddingsWorkload(format string, dims int) workload {
	body := func(model string) []byte {
		return jsonBody(map[string]any{"model": model, "input": benchInput, "encoding_format": format})
	}
	return workload{
		name:   "embeddings-" + format,
		format: format,
		usage:  true,
		targets: func(f *fixture) (*target, *target, error) {
			direct := newTarget("direct", http.MethodPost, f.upstream.URL()+"/embeddings", body(upstreamEmbedModel),
				"Authorization", "Bearer "+upstreamKey)
			gateway := newTarget("gateway", http.MethodPost, f.gatewayURL+"/v1/embeddings", body(gatewayPrefix+upstreamEmbedModel),
				"Authorization", "Bearer "+f.apiKey)
			return direct, gateway, nil
		},
		check: func(body, direct []byte) error {
			got, err := firstEmbedding(body)
			if err != nil {
				return err
			}
			if err := checkVector(got, format, dims); err != nil {
				return err
			}
			if direct != nil {
				want, err := firstEmbedding(direct)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, want) {
					return errors.New("the vector differs from the upstream's")
				}
			}
			return nil
		},
	}
}

// chatWorkload is POST /v1/chat/completions with one user message, the
// answer streamed or not. The fake answers "echo: <message>" at once
// (no chunk delay), so the figures are the cost of the calls, not of
// generation.
func chatWorkload(stream bool) workload {
	input := benchInput
	if stream {
		input = streamInput
	}
	body := func(model string) []byte {
		m := map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": input}}}
		if stream {
			m["stream"] = true
		}
		return jsonBody(m)
	}
	name := "chat"
	content := chatContent
	if stream {
		name = "chat-stream"
		content = streamContent
	}
	return workload{
		name:  name,
		usage: true,
		targets: func(f *fixture) (*target, *target, error) {
			direct := newTarget("direct", http.MethodPost, f.upstream.URL()+"/chat/completions", body(upstreamChatModel),
				"Authorization", "Bearer "+upstreamKey)
			gateway := newTarget("gateway", http.MethodPost, f.gatewayURL+"/v1/chat/completions", body(gatewayPrefix+upstreamChatModel),
				"Authorization", "Bearer "+f.apiKey)
			direct.stream, gateway.stream = stream, stream
			return direct, gateway, nil
		},
		check: func(body, _ []byte) error {
			got, err := content(body)
			if err != nil {
				return err
			}
			if want := upstreamtest.EchoPrefix + input; got != want {
				return fmt.Errorf("answer %q, want %q", got, want)
			}
			return nil
		},
	}
}

// chatContent is the message content of a chat completion.
func chatContent(body []byte) (string, error) {
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return "", fmt.Errorf("decode the answer: %w", err)
	}
	if len(c.Choices) != 1 {
		return "", fmt.Errorf("%d choices in the answer, want 1", len(c.Choices))
	}
	return c.Choices[0].Message.Content, nil
}

// streamContent is the content of a streamed chat completion, put together
// from its deltas; the stream must end with data: [DONE].
func streamContent(body []byte) (string, error) {
	var content strings.Builder
	done := false
	for line := range bytes.Lines(body) {
		line = bytes.TrimSpace(line)
		data, ok := bytes.CutPrefix(line, sseData)
		if !ok {
			continue // blank separators, comments, other fields
		}
		if done {
			return "", errors.New("an event after data: [DONE]")
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return "", fmt.Errorf("decode an event: %w", err)
		}
		if chunk.Error != nil {
			return "", fmt.Errorf("an error event: %s", chunk.Error)
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	if !done {
		return "", errors.New("the stream does not end with data: [DONE]")
	}
	return content.String(), nil
}

// modelsWorkload is GET /v1/models of the catalog machine: 100 connections
// of 50 enabled models each. The fake's own listing (four models) is its
// direct counterpart: a floor for an HTTP round trip, not the same call.
func modelsWorkload() workload {
	const want = catalogConnections * catalogModels
	return workload{
		name: "models",
		note: fmt.Sprintf("models: the gateway lists %d models of %d connections (a second machine); direct is the fake's own 4-model list, only a floor for a round trip, not an equivalent call", want, catalogConnections),
		// A 5,000-model listing is about 450 KB: the gateway answers a few
		// dozen per second on two cores, so -rate would measure a queue.
		maxRate: 20,
		targets: func(f *fixture) (*target, *target, error) {
			direct := newTarget("direct", http.MethodGet, f.upstream.URL()+"/models", nil, "Authorization", "Bearer "+upstreamKey)
			gateway := newTarget("gateway", http.MethodGet, f.gatewayURL+"/v1/models", nil, "Authorization", "Bearer "+f.catalogKey)
			return direct, gateway, nil
		},
		check: func(body, direct []byte) error {
			var l struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &l); err != nil {
				return fmt.Errorf("decode the listing: %w", err)
			}
			if len(l.Data) == 0 {
				return errors.New("an empty listing")
			}
			if direct != nil && len(l.Data) < want {
				return fmt.Errorf("%d models listed, want at least %d", len(l.Data), want)
			}
			return nil
		},
	}
}

// run starts the system, measures every workload and returns the report.
// Progress lines go to progress.
func run(ctx context.Context, o options, fo fixtureOptions, logger *slog.Logger, progress io.Writer) (rep *report, err error) {
	rep = newReport(o)
	fo.dims = o.Dims
	f, err := startFixture(ctx, fo, logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.close(); cerr != nil && err == nil {
			err = fmt.Errorf("stop: %w", cerr)
		}
	}()
	rep.Gateway.ReadyMs = ms(f.readyLine)
	rep.Gateway.ReadyHTTPMs = ms(f.readyHTTP)
	rep.Gateway.RestMiB = mib(f.restKB)
	fmt.Fprintf(progress, "gateway ready %.0f ms after exec (/readyz 200 at %.0f ms); %.1f MiB resident at rest\n",
		rep.Gateway.ReadyMs, rep.Gateway.ReadyHTTPMs, rep.Gateway.RestMiB)
	client := newLoadClient(o.Concurrency)
	defer client.CloseIdleConnections()
	var answered int
	if answered, err = measure(ctx, o, f, client, rep, progress); err != nil {
		return nil, err
	}
	if st, ok := readProc(f.gateway.pid()); ok {
		// Since the last reset; the workloads' peaks cover the rest.
		rep.Gateway.PeakMiB = max(rep.Gateway.PeakMiB, mib(st.hwmKB))
	}
	for _, wr := range rep.Workloads {
		rep.Gateway.PeakMiB = max(rep.Gateway.PeakMiB, ptrOr(wr.GatewayPeakMiB))
	}
	if st, ok := readProc(f.proxy.pid()); ok {
		rep.Proxy.PeakMiB = mib(st.hwmKB)
	}
	if log := f.proxy.stderr.String(); log != "" {
		fmt.Fprintf(progress, "the proxy's log (last lines):\n%s\n", log)
	}
	if fo.heapProfile != "" {
		if err := f.fetchProfile(ctx, "heap", fo.heapProfile); err != nil {
			return nil, fmt.Errorf("heap profile: %w", err)
		}
	}
	if fo.allocProfile != "" {
		if err := f.fetchProfile(ctx, "allocs", fo.allocProfile); err != nil {
			return nil, fmt.Errorf("allocation profile: %w", err)
		}
	}
	// Stop the gateway (it drains its usage buffer on the way), then count
	// what reached its usage stream.
	g := f.gateway
	f.gateway = nil
	if err := g.stop(30 * time.Second); err != nil {
		return nil, fmt.Errorf("stop the gateway: %w", err)
	}
	rep.Usage.Answered = answered
	if rep.Usage.Published, rep.Usage.Messages, rep.Usage.DeadLetters, err = countUsage(ctx, f.dataDir); err != nil {
		return nil, fmt.Errorf("count usage events: %w", err)
	}
	rep.Usage.Lost = max(rep.Usage.Answered-rep.Usage.Published-rep.Usage.DeadLetters, 0)
	rep.finish()
	return rep, nil
}

// measure probes, warms up and runs the rounds. It returns how many gateway
// requests that record a usage event were answered 2xx (probes and warm-up
// included).
func measure(ctx context.Context, o options, f *fixture, client *http.Client, rep *report, progress io.Writer) (answered int, err error) {
	ws := selected(o)
	trios := make([]trio, len(ws))
	for i, w := range ws {
		d, g, err := w.targets(f)
		if err != nil {
			return 0, err
		}
		g.overhead = true
		g.pid = f.gateway.pid()
		p := d.via("proxy", f.upstream.URL(), f.proxy.url+"/v1")
		p.pid = f.proxy.pid()
		n, err := probe(ctx, client, w, d, p, g)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", w.name, err)
		}
		if w.usage {
			answered += n
		}
		trios[i] = trio{d, p, g}
		rep.Workloads = append(rep.Workloads, &workloadReport{Name: w.name, Format: w.format, Rate: w.rate(o), Note: w.note})
	}

	if o.Warmup > 0 {
		for i, t := range trios {
			for _, tg := range t.all() {
				ph := closedLoop(ctx, client, tg, o.Concurrency, o.Warmup)
				if tg == t.gateway && ws[i].usage {
					answered += len(ph.samples)
				}
			}
		}
	}

	// The peak so far (start-up, probes, warm-up), before the rounds reset
	// the high-water mark.
	if st, ok := readProc(f.gateway.pid()); ok {
		rep.Gateway.PeakMiB = mib(st.hwmKB)
	}
	repeats := o.Rounds // rounds that may be repeated, in all
	for r := range o.Rounds {
		for i, t := range trios {
			wr := rep.Workloads[i]
			// The gateway's peak is taken per workload: its high-water mark
			// is reset before the round (to what it holds then, which earlier
			// workloads may have left it) and read after it.
			var start procStat
			peaks := resetPeak(f.gateway.pid())
			if peaks {
				// Right after the reset the high-water mark is what the
				// process held then.
				start, peaks = readProc(f.gateway.pid())
			}
			for {
				rd, worst, err := measureRound(ctx, o, ws[i].rate(o), client, t, func(s string) {
					fmt.Fprintf(progress, "round %d/%d %-17s %s\n", r+1, o.Rounds, wr.Name, s)
				})
				if err != nil {
					return 0, err
				}
				if ws[i].usage {
					answered += rd.Gateway.Saturation.Requests + rd.Gateway.Fixed.Requests
				}
				if worst > o.MaxOthers && repeats > 0 {
					repeats--
					rep.Repeated++
					fmt.Fprintf(progress, "round %d/%d %-17s disturbed: other processes took %.0f%% of the CPUs; repeating it\n", r+1, o.Rounds, wr.Name, worst)
					continue
				}
				wr.Rounds = append(wr.Rounds, rd)
				break
			}
			if st, ok := readProc(f.gateway.pid()); ok && peaks {
				if peak, from := mib(st.hwmKB), mib(start.hwmKB); peak > ptrOr(wr.GatewayPeakMiB) {
					wr.GatewayPeakMiB, wr.GatewayFromMiB = &peak, &from
				}
			}
		}
	}
	return answered, nil
}

// trio is one workload's targets: straight to the fake, through the bare
// proxy, through the gateway.
type trio struct{ direct, proxy, gateway *target }

func (t trio) all() []*target { return []*target{t.direct, t.proxy, t.gateway} }

// measureRound runs one round of a workload, interleaved: saturation
// direct, proxy, gateway, then the fixed rate in the same order. It returns
// the largest share of CPU other processes took during a phase (0 where
// unknown).
func measureRound(ctx context.Context, o options, rate int, client *http.Client, t trio, report func(string)) (rd roundReport, worst float64, err error) {
	saturation := func(tg *target) *phase { return closedLoop(ctx, client, tg, o.Concurrency, o.Duration) }
	fixed := func(tg *target) *phase { return openLoop(ctx, client, tg, rate, o.Duration) }
	steps := []struct {
		name string
		tg   *target
		dst  *stats
		load func(*target) *phase
	}{
		{"saturation", t.direct, &rd.Direct.Saturation, saturation},
		{"saturation", t.proxy, &rd.Proxy.Saturation, saturation},
		{"saturation", t.gateway, &rd.Gateway.Saturation, saturation},
		{"fixed-rate", t.direct, &rd.Direct.Fixed, fixed},
		{"fixed-rate", t.proxy, &rd.Proxy.Fixed, fixed},
		{"fixed-rate", t.gateway, &rd.Gateway.Fixed, fixed},
	}
	for _, s := range steps {
		runtime.GC() // start every phase with the same heap
		*s.dst = s.load(s.tg).stats(s.tg)
		if err := ctx.Err(); err != nil {
			return rd, 0, fmt.Errorf("interrupted: %w", err)
		}
		if s.dst.OthersPct != nil {
			worst = max(worst, *s.dst.OthersPct)
		}
		report(fmt.Sprintf("%-7s %-10s %s", s.tg.name, s.name, s.dst.brief()))
	}
	return rd, worst, nil
}

// probe checks once, before any load, that the three targets give the
// workload a good answer (w.check), the gateway's with the overhead header,
// and for a stream a whole one. It waits (at most 10 s) for what the fixture
// created to reach the gateway's routing and catalog, and returns how many
// gateway requests were answered 2xx.
func probe(ctx context.Context, c *http.Client, w workload, direct, proxy, gateway *target) (int, error) {
	want, _, err := fetch(ctx, c, direct)
	if err == nil {
		err = w.check(want, nil)
	}
	if err != nil {
		return 0, fmt.Errorf("direct: %w", err)
	}
	// The proxy passes the upstream's answer on: judged as a direct one.
	got, _, err := fetch(ctx, c, proxy)
	if err == nil {
		err = w.check(got, nil)
	}
	if err != nil {
		return 0, fmt.Errorf("proxy: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	answered := 0
	for {
		got, header, err := fetch(ctx, c, gateway)
		if err == nil {
			answered++
			if header.Get(overheadHeader) == "" {
				return answered, fmt.Errorf("gateway: the answer has no %s header", overheadHeader)
			}
			err = w.check(got, want)
		}
		if err == nil {
			return answered, nil
		}
		if time.Now().After(deadline) {
			return answered, fmt.Errorf("gateway: %w", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return answered, ctx.Err()
		}
	}
}

// fetch sends one request of tg and returns the body of its 2xx answer.
func fetch(ctx context.Context, c *http.Client, tg *target) ([]byte, http.Header, error) {
	req, err := tg.request(ctx)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(data[:min(len(data), errorSnippet)]))
	}
	if tg.stream && tg.whole != nil && !tg.whole(data) {
		return nil, nil, errors.New("a stream that does not end whole")
	}
	if tg.stream && tg.whole == nil && !bytes.HasSuffix(bytes.TrimRight(data, "\r\n"), streamEnd) {
		return nil, nil, fmt.Errorf("a stream that does not end with %s", streamEnd)
	}
	return data, resp.Header, nil
}

// firstEmbedding is the raw first embedding of an embeddings answer, which
// must hold exactly one.
func firstEmbedding(data []byte) (json.RawMessage, error) {
	var body struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("decode the answer: %w", err)
	}
	if len(body.Data) != 1 {
		return nil, fmt.Errorf("%d embeddings in the answer, want 1", len(body.Data))
	}
	return body.Data[0].Embedding, nil
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
