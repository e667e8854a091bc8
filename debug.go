package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	rpprof "runtime/pprof"
	"strconv"
	"time"
)

// Environment variables of the process's diagnostics (no flags: they are for
// whoever profiles a running process, not configuration).
const (
	// debugAddrEnv makes the process serve net/http/pprof under
	// /debug/pprof/ on this address, which must be a loopback one.
	debugAddrEnv = "SWITCHBOARD_DEBUG_ADDR"
	// cpuProfileEnv makes the process write a CPU profile of its whole
	// life to this file (written when it stops).
	cpuProfileEnv = "SWITCHBOARD_CPU_PROFILE"
	// memoryLimitEnv is the soft memory limit the runtime's garbage
	// collector works to, in MiB, when GOMEMLIMIT is not set.
	memoryLimitEnv = "SWITCHBOARD_MEMORY_LIMIT_MIB"
)

// Memory default of a proxy: the collector keeps its usual target (GOGC
// 100: the heap may grow to twice what is live), and a soft limit stops that
// doubling from taking a large heap far past a budget. The limit sits well
// above the working set under load (about 14 MiB of live heap at chat
// saturation, 8 MiB of it the usage stream's write cache: a JetStream block
// buffer the server sizes by the stream's bounds). Lower limits trade CPU for
// memory: with cmd/bench, one workload at a time, 36 MiB brought the chat
// peak from 77 to 62 MiB at 7% more CPU per request, and 40 MiB float
// embeddings from 74 to 66 MiB at 1%; 36 MiB with GOGC 50 reached 57-62 MiB
// at 17-40% more CPU per request.
const defaultMemoryLimitMiB = 256

// tuneMemory applies the memory limit unless the operator set GOMEMLIMIT
// (which the runtime already applied); memoryLimitEnv changes it. GOGC is
// left to the runtime (and to the operator's GOGC).
func tuneMemory(getenv func(string) string) error {
	if getenv("GOMEMLIMIT") != "" {
		return nil
	}
	mib := int64(defaultMemoryLimitMiB)
	if v := getenv(memoryLimitEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 8 || n > 1<<30 {
			return fmt.Errorf("%s: want a number of MiB from 8, got %q", memoryLimitEnv, v)
		}
		mib = n
	}
	debug.SetMemoryLimit(mib << 20)
	return nil
}

// startDiagnostics starts what the diagnostics variables ask for and
// returns the function that stops them (writing the CPU profile).
func startDiagnostics(getenv func(string) string, stdout io.Writer, log *slog.Logger) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if path := getenv(cpuProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return stop, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		if err := rpprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		stops = append(stops, func() {
			rpprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Error("write the CPU profile", "err", err)
			}
		})
	}
	if addr := getenv(debugAddrEnv); addr != "" {
		if err := checkDebugAddr(addr); err != nil {
			return stop, err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return stop, fmt.Errorf("%s: %w", debugAddrEnv, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("debug listener", "err", err)
			}
		}()
		fmt.Fprintf(stdout, "switchboard %s: profiles at http://%s/debug/pprof/\n", version, ln.Addr())
		stops = append(stops, func() { srv.Close() })
	}
	return stop, nil
}

// checkDebugAddr refuses a debug address (debugAddrEnv) that is not a
// loopback one; none is fine.
func checkDebugAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", debugAddrEnv, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: %q is not a loopback address (the profiles say too much to be served elsewhere)", debugAddrEnv, addr)
	}
	return nil
}
