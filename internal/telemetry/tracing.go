package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing is a process's tracer provider and W3C propagator. A nil
// *Tracing is tracing switched off: its tracers start no spans, its
// middlewares pass requests through untouched, and nothing is allocated.
type Tracing struct {
	provider trace.TracerProvider
	prop     propagation.TextMapPropagator
	shutdown func(context.Context) error
}

// NewTracing traces with tp (tests pass an SDK provider with an in-memory
// exporter). A nil tp means off: NewTracing returns nil.
func NewTracing(tp trace.TracerProvider) *Tracing {
	if tp == nil {
		return nil
	}
	if _, off := tp.(noop.TracerProvider); off {
		return nil
	}
	return &Tracing{provider: tp, prop: propagation.TraceContext{}, shutdown: func(context.Context) error { return nil }}
}

// ErrUnsupportedExporter is a trace exporter or protocol this build does
// not include.
var ErrUnsupportedExporter = errors.New("unsupported trace exporter")

// TracingFromEnv reads the standard OpenTelemetry variables: traces are
// exported over OTLP/HTTP when OTEL_TRACES_EXPORTER is "otlp", or when it is
// unset and OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn them off.
// The exporter itself reads the endpoint, headers, timeout and TLS
// variables, and the SDK reads OTEL_TRACES_SAMPLER and its argument;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the process
// (service.name defaults to "switchboard"). Off, it returns nil.
func TracingFromEnv(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	on, err := tracesAsked(getenv)
	if !on || err != nil {
		return nil, err
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "switchboard")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	t := NewTracing(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// CheckEnv reports the exporter and protocol of the OTEL_* variables that
// TracingFromEnv would refuse, every one of them, without starting
// anything: start-up reports them with the rest of the configuration.
func CheckEnv(getenv func(string) string) error {
	_, err := tracesAsked(getenv)
	return err
}

// tracesAsked reads whether the variables ask for traces, refusing an
// exporter or a protocol this build does not include.
func tracesAsked(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	var errs []error
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, nil
		}
	case "otlp":
	default:
		errs = append(errs, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (this build exports traces with otlp over HTTP only)", ErrUnsupportedExporter, exp))
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		errs = append(errs, fmt.Errorf("%w: OTLP protocol %q (this build speaks http/protobuf)", ErrUnsupportedExporter, proto))
	}
	return true, errors.Join(errs...)
}

// Enabled reports whether spans are recorded.
func (t *Tracing) Enabled() bool { return t != nil }

// Shutdown flushes and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Tracer returns the named tracer, nil (a tracer that starts nothing) when
// tracing is off.
func (t *Tracing) Tracer(name string) *Tracer {
	if t == nil {
		return nil
	}
	return &Tracer{t: t.provider.Tracer(name)}
}

// Tracer starts spans. A nil *Tracer is off and costs nothing: Start
// returns ctx unchanged and a span that records nothing.
type Tracer struct {
	t trace.Tracer
}

// off is the span a disabled tracer hands out.
var off trace.Span = noop.Span{}

// Start starts a span as a child of ctx's. Set attributes only when
// span.IsRecording(), so a disabled tracer builds none.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t == nil {
		return ctx, off
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}
