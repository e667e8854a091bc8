package main

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// restoreMemory puts the runtime's GC settings back after a test.
func restoreMemory(t *testing.T) {
	gc := debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	})
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestMemoryDefaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		wantGC    int
		wantLimit int64 // -1: left as it was
		wantErr   bool
	}{
		{"defaults", nil, -1, defaultMemoryLimitMiB << 20, false},
		{"an explicit GOMEMLIMIT wins", map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB", memoryLimitEnv: "128"}, -1, -1, false},
		{"configured limit", map[string]string{memoryLimitEnv: "128"}, -1, 128 << 20, false},
		{"bad limit", map[string]string{memoryLimitEnv: "lots"}, -1, -1, true},
		{"limit too small", map[string]string{memoryLimitEnv: "1"}, -1, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restoreMemory(t)
			debug.SetGCPercent(77)
			debug.SetMemoryLimit(math.MaxInt64)
			err := tuneMemory(env(tc.env))
			if tc.wantErr {
				assert.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			gc := debug.SetGCPercent(77)
			if tc.wantGC < 0 {
				assert.Equal(t, 77, gc, "the GC percent is left to the runtime")
			} else {
				assert.Equal(t, tc.wantGC, gc)
			}
			limit := debug.SetMemoryLimit(-1)
			if tc.wantLimit < 0 {
				assert.Equal(t, int64(math.MaxInt64), limit, "the limit is left as it was")
			} else {
				assert.Equal(t, tc.wantLimit, limit)
			}
		})
	}
}

func TestDebugListenerOnlyOnLoopback(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:0", ":0", "example.com:0"} {
		stop, err := startDiagnostics(env(map[string]string{debugAddrEnv: addr}), io.Discard, log)
		stop()
		assert.Error(t, err, addr)
	}

	var out bytes.Buffer
	stop, err := startDiagnostics(env(map[string]string{debugAddrEnv: "127.0.0.1:0"}), &out, log)
	require.NoError(t, err)
	defer stop()
	url := regexp.MustCompile(`http://\S+/debug/pprof/`).FindString(out.String())
	require.NotEmpty(t, url, out.String())
	resp, err := http.Get(url + "heap")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// Without the variable, nothing listens.
	out.Reset()
	stop2, err := startDiagnostics(env(nil), &out, log)
	require.NoError(t, err)
	stop2()
	assert.Empty(t, out.String())
}
