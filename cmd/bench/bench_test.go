package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary be re-executed as the bench's proxy, as the
// bench program is.
func TestMain(m *testing.M) {
	if code, ran := runRole(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// The quick run drives every workload (embeddings, chat, chat streams, the
// 5,000-model listing) through the gateway and directly, and every request
// must succeed with the overhead header on gateway answers, and every stream
// end with data: [DONE]. Timing is only printed, never asserted.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole service and loads it for about 2 s")
	}
	var progress bytes.Buffer
	rep, err := run(context.Background(), quickOptions(), fixtureOptions{}, slog.New(slog.DiscardHandler), &progress)
	require.NoError(t, err)
	t.Log("\n" + progress.String())

	require.Len(t, rep.Workloads, len(workloads(quickOptions().Dims)))
	var names []string
	for _, w := range rep.Workloads {
		names = append(names, w.Name)
	}
	assert.Equal(t, []string{"embeddings-float", "embeddings-base64", "chat", "chat-stream",
		"messages", "messages-stream", "responses", "responses-stream", "models"}, names)
	assert.Zero(t, rep.Failures, "failed requests")
	for _, w := range rep.Workloads {
		require.Len(t, w.Rounds, 1, w.Name)
		for _, r := range w.Rounds {
			for name, s := range map[string]stats{
				"direct saturation": r.Direct.Saturation, "direct fixed-rate": r.Direct.Fixed,
				"proxy saturation": r.Proxy.Saturation, "proxy fixed-rate": r.Proxy.Fixed,
				"gateway saturation": r.Gateway.Saturation, "gateway fixed-rate": r.Gateway.Fixed,
			} {
				assert.Positive(t, s.Requests, "%s %s: answered requests", w.Name, name)
				assert.Zero(t, s.NonOK, "%s %s: non-2xx (first: %s)", w.Name, name, s.FirstError)
				assert.Zero(t, s.Transport, "%s %s: transport errors (first: %s)", w.Name, name, s.FirstError)
				assert.Zero(t, s.Invalid, "%s %s: incomplete streams (first: %s)", w.Name, name, s.FirstError)
				if strings.HasSuffix(w.Name, "-stream") {
					assert.NotNil(t, s.TTFBP50Us, "%s %s: time to the first event", w.Name, name)
				} else {
					assert.Nil(t, s.TTFBP50Us, "%s %s: a time to the first event of a non-stream", w.Name, name)
				}
			}
			for name, s := range map[string]stats{"saturation": r.Gateway.Saturation, "fixed-rate": r.Gateway.Fixed} {
				assert.Zero(t, s.NoOverhead, "%s gateway %s: answers without the overhead header", w.Name, name)
				assert.Equal(t, s.Requests, s.Overheads, "%s gateway %s: every answer carries the overhead header", w.Name, name)
			}
		}
		require.NotNil(t, w.Gateway.OverheadP50Us, w.Name)
		assert.Positive(t, w.Gateway.TargetCPUPerReqUs, "%s: the gateway process's CPU per request", w.Name)
		assert.Positive(t, w.Proxy.TargetCPUPerReqUs, "%s: the proxy process's CPU per request", w.Name)
	}

	// The gateway ran as its own process: its start-up and memory were
	// read from /proc, and every answered request that records usage has
	// its event in the usage stream.
	assert.Positive(t, rep.Gateway.ReadyMs, "ready time")
	assert.Positive(t, rep.Gateway.RestMiB, "memory at rest")
	assert.GreaterOrEqual(t, rep.Gateway.PeakMiB, rep.Gateway.RestMiB, "peak memory")
	if resetPeak(os.Getpid()) {
		// Where the high-water mark can be reset, each workload has its
		// own peak, from what the gateway held as its round began.
		for _, w := range rep.Workloads {
			require.NotNil(t, w.GatewayPeakMiB, "%s: the gateway's peak under this workload", w.Name)
			require.NotNil(t, w.GatewayFromMiB, w.Name)
			assert.Positive(t, *w.GatewayFromMiB, w.Name)
			// The kernel's counters are approximate (per-CPU batches): a
			// fraction of a MiB either way.
			assert.GreaterOrEqual(t, *w.GatewayPeakMiB+1, *w.GatewayFromMiB, w.Name)
		}
	}
	assert.Positive(t, rep.Usage.Answered, "answered requests that record usage")
	assert.Zero(t, rep.Usage.Lost, "usage events lost: %+v", rep.Usage)

	// Both outputs render.
	require.NoError(t, rep.writeTable(io.Discard))
	var out bytes.Buffer
	require.NoError(t, rep.writeJSON(&out))
	assert.True(t, json.Valid(out.Bytes()))
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-rate", "0"}, {"-concurrency", "0"}, {"-duration", "-1s"}, {"-rounds", "0"}, {"extra"}, {"-nope"}, {"-workloads", "chat,nope"},
	} {
		assert.Equal(t, exitSetup, runMain(args, io.Discard, io.Discard), "%q", args)
	}
}

// TestGatewayThatCannotStart: a run whose gateway does not start says why
// and stops the proxy it had started, instead of crashing on the way out.
func TestGatewayThatCannotStart(t *testing.T) {
	var stderr bytes.Buffer
	code := runMain([]string{"-quick", "-serve-bin", filepath.Join(t.TempDir(), "missing")}, io.Discard, &stderr)
	assert.Equal(t, exitSetup, code)
	assert.Contains(t, stderr.String(), "start switchboard serve")
	if runtime.GOOS == "linux" {
		assert.Empty(t, childProcesses(t), "the proxy process is stopped")
	}
}

// childProcesses lists this process's children (Linux).
func childProcesses(t *testing.T) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	require.NoError(t, err)
	var kids []string
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // the thread ended
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

func TestPercentile(t *testing.T) {
	xs := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[int]int64{50: 5, 90: 9, 99: 10, 100: 10, 1: 1} {
		assert.Equal(t, want, percentile(xs, p), "p%d", p)
	}
	assert.Zero(t, percentile([]int64(nil), 50))
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
}
