// Package telemetry builds what every role needs to be watched: the
// process's Prometheus registry and its handler, the private metrics
// listener, the OpenTelemetry tracer provider read from the standard OTEL_*
// variables, and W3C trace-context propagation over HTTP and gRPC.
//
// Nothing here is global: node builds one Registry and one Tracing per
// process and hands them to the roles through their Deps.
package telemetry

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboardhq/switchboard/internal/bearer"
)

// Namespace prefixes every switchboard metric.
const Namespace = "switchboard"

// Other is the label value that stands for any value outside a bounded set
// (a model id no catalog or configuration knows).
const Other = "other"

// NewRegistry returns a registry with the Go runtime and process
// collectors: the one registry of a process.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Registerer returns reg, or a private throwaway registry when reg is nil
// (a nil *prometheus.Registry included), so packages register their
// metrics without checking.
func Registerer(reg prometheus.Registerer) prometheus.Registerer {
	if r, ok := reg.(*prometheus.Registry); reg == nil || (ok && r == nil) {
		return prometheus.NewRegistry()
	}
	return reg
}

// Handler serves the registry in the Prometheus exposition formats.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// AdminOnly serves next only to a request bearing the admin token
// ("Authorization: Bearer <token>", the scheme in any case); others get a
// 401 in the shape deny writes. The comparison takes constant time.
func AdminOnly(token string, next http.Handler, deny func(w http.ResponseWriter)) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := bearer.Token(r.Header.Get("Authorization"))
		if got == "" || len(want) == 0 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
			deny(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Listener is the private metrics listener (SWITCHBOARD_METRICS_ADDR): GET
// /metrics without authentication, for a scraper on a private network.
type Listener struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// Listen binds the metrics listener on addr.
func Listen(addr string, g prometheus.Gatherer, log *slog.Logger) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g))
	return &Listener{ln: ln, log: log, srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}, nil
}

// Addr is the listener's address.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Run serves until ctx ends.
func (l *Listener) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- l.srv.Serve(l.ln) }()
	l.log.Info("metrics listening", "addr", "http://"+l.Addr()+"/metrics")
	select {
	case err := <-errc:
		return fmt.Errorf("metrics serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close releases the listener of a Listener that never ran.
func (l *Listener) Close() { _ = l.ln.Close() }
