package node

import (
	"context"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// Options are what a process takes besides its configuration.
type Options struct {
	// TracerProvider replaces the one the OTEL_* variables describe (tests
	// pass an SDK provider with an in-memory exporter).
	TracerProvider trace.TracerProvider
}

// startTelemetry builds the process's one metrics registry (every role
// registers into it), its tracing (off unless the OTEL_* variables or opts
// ask for it) and the private metrics listener when configured.
func (n *Node) startTelemetry(ctx context.Context, opts Options) error {
	n.metrics = telemetry.NewRegistry()
	if opts.TracerProvider != nil {
		n.tracing = telemetry.NewTracing(opts.TracerProvider)
	} else {
		t, err := telemetry.TracingFromEnv(ctx, os.Getenv)
		if err != nil {
			return err
		}
		n.tracing = t
	}
	if n.tracing.Enabled() {
		n.log.Info("tracing on: spans are exported over OTLP")
	}
	if n.cfg.MetricsAddr != "" {
		ln, err := telemetry.Listen(n.cfg.MetricsAddr, n.metrics, n.log)
		if err != nil {
			return err
		}
		n.metricsLn = ln
	}
	return nil
}

// observeNATS adds the NATS connection's state to the registry.
func (n *Node) observeNATS() {
	if n.nc != nil {
		n.metrics.MustRegister(spine.Collector(n.nc, n.embedded))
	}
}

// Metrics is the process's registry.
func (n *Node) Metrics() *prometheus.Registry { return n.metrics }

// MetricsAddr is the private metrics listener's address ("" without one).
func (n *Node) MetricsAddr() string {
	if n.metricsLn == nil {
		return ""
	}
	return n.metricsLn.Addr()
}

// stopTelemetry flushes the spans still buffered, for at most a few
// seconds, and closes a metrics listener that never ran.
func (n *Node) stopTelemetry() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n.metricsLn != nil {
		n.metricsLn.Close()
	}
	if err := n.tracing.Shutdown(ctx); err != nil {
		n.log.Warn("flushing traces failed", "err", err)
	}
}
