// Package edge is the edge role: the OpenAI-compatible HTTP routes and the
// admin API, translated to core's gRPC services by grpc-gateway and by custom
// handlers where the wire format needs it. The edge holds no state.
package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboardhq/switchboard/edge/internal/clitools"
	"github.com/switchboardhq/switchboard/edge/internal/gateway"
	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// DefaultMaxBodyBytes caps JSON request bodies.
const DefaultMaxBodyBytes = 32 << 20

// Config configures the edge.
type Config struct {
	// HTTPAddr is the listen address; port 0 picks a free port.
	HTTPAddr        string
	ShutdownTimeout time.Duration
	MaxBodyBytes    int64
	// MaxAudioBytes caps a transcription upload (zero:
	// openai.DefaultMaxAudioBytes).
	MaxAudioBytes int64
	// PublicURL is the gateway's public base URL (the desktop CLI settings
	// route points tools at it).
	PublicURL string
	// CLIHomeDir is the home directory whose CLI settings files the desktop
	// CLI settings route edits (empty: os.UserHomeDir()).
	CLIHomeDir string
	// KeepAliveEvery is how long a started chat stream may be silent before
	// the edge sends an SSE keep-alive comment (zero:
	// openai.KeepAliveEvery).
	KeepAliveEvery time.Duration
	// Billing configures the GraphQL and webhook routes (mounted when
	// Deps.Billing is set).
	Billing BillingConfig
	// AdminToken guards GET /metrics (empty: no /metrics on this listener).
	AdminToken string
}

// Deps are the services the edge fronts.
type Deps struct {
	// Core is a connection to core's gRPC services.
	Core grpc.ClientConnInterface
	// Billing is a connection to billing's gRPC service (optional).
	Billing grpc.ClientConnInterface
	Logger  *slog.Logger
	// Metrics is the process's registry (nil: no metrics).
	Metrics *prometheus.Registry
	// Tracing continues and starts traces (nil: off).
	Tracing *telemetry.Tracing
}

// Edge is a running edge role.
type Edge struct {
	cfg     Config
	ln      net.Listener
	srv     *http.Server
	log     *slog.Logger
	core    grpc.ClientConnInterface
	billing grpc.ClientConnInterface
}

// New builds the edge and binds its listener.
func New(ctx context.Context, cfg Config, deps Deps) (*Edge, error) {
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 15 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	e := &Edge{cfg: cfg, log: deps.Logger.With("role", "edge"), core: deps.Core, billing: deps.Billing}
	gw, err := gateway.New(ctx, deps.Core, addUpstream)
	if err != nil {
		return nil, fmt.Errorf("edge: gateway: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", e.readyz)
	emb := &openai.Embeddings{
		Router:   corev1.NewRouterClient(deps.Core),
		Upstream: func(r *http.Request, us int64) { addUpstream(r.Context(), us) },
	}
	mux.Handle("POST /v1/embeddings", limitBody(cfg.MaxBodyBytes, emb))
	mux.Handle("POST /{machineId}/v1/embeddings", limitBody(cfg.MaxBodyBytes, emb))
	// Transcriptions stream their upload and apply their own limit.
	mux.Handle("POST /v1/audio/transcriptions", &openai.Transcriptions{
		Router: corev1.NewRouterClient(deps.Core), MaxBytes: cfg.MaxAudioBytes, Upstream: emb.Upstream})
	mux.Handle("POST /v1/audio/speech", limitBody(cfg.MaxBodyBytes, &openai.Speech{Router: corev1.NewRouterClient(deps.Core), Upstream: emb.Upstream}))
	chat := &openai.Chat{Router: corev1.NewRouterClient(deps.Core), Upstream: emb.Upstream, KeepAliveEvery: cfg.KeepAliveEvery}
	mux.Handle("POST /v1/chat/completions", limitBody(cfg.MaxBodyBytes, chat))
	mux.Handle("POST /{machineId}/v1/chat/completions", limitBody(cfg.MaxBodyBytes, chat))
	mux.Handle("/", limitBody(cfg.MaxBodyBytes, gw))
	e.mountCLITools(mux, deps.Core)
	if deps.Metrics != nil {
		mountMetrics(mux, deps.Metrics, cfg.AdminToken)
	}
	if deps.Billing != nil {
		if err := mountBilling(mux, deps.Billing, cfg.Billing, e.log); err != nil {
			return nil, err
		}
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("edge: listen: %w", err)
	}
	e.ln = ln
	e.srv = &http.Server{
		Handler:           overhead(cors(deps.Tracing.Middleware(newHTTPMetrics(deps.Metrics).wrap(mux)))),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	return e, nil
}

// mountCLITools serves the desktop CLI settings route, which edits files in
// the home directory of the machine the edge runs on.
func (e *Edge) mountCLITools(mux *http.ServeMux, core grpc.ClientConnInterface) {
	home := e.cfg.CLIHomeDir
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			e.log.Warn("no home directory: the CLI settings route is off", "err", err)
			return
		}
		home = h
	}
	publicURL := e.cfg.PublicURL
	if publicURL == "" {
		publicURL = "http://" + e.cfg.HTTPAddr
	}
	mux.Handle(clitools.ClaudeSettingsPath, &clitools.ClaudeSettings{
		Admin:     corev1.NewAdminClient(core),
		PublicURL: publicURL,
		Home:      home,
	})
}

// Addr is the address the edge listens on.
func (e *Edge) Addr() string { return e.ln.Addr().String() }

// Run serves until ctx ends, then drains in-flight requests for at most the
// shutdown timeout.
func (e *Edge) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- e.srv.Serve(e.ln) }()
	e.log.Info("edge listening", "addr", "http://"+e.Addr())
	select {
	case err := <-errc:
		return fmt.Errorf("edge: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ShutdownTimeout)
	defer cancel()
	if err := e.srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("edge: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readyz answers 200 once the services the edge fronts answer health checks.
func (e *Edge) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := []struct {
		name, service string
		conn          grpc.ClientConnInterface
	}{
		{"core", corev1.Router_ServiceDesc.ServiceName, e.core},
		{"billing", billingv1.Billing_ServiceDesc.ServiceName, e.billing},
	}
	for _, c := range checks {
		if c.conn == nil {
			continue
		}
		resp, err := healthpb.NewHealthClient(c.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: c.service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			openai.NewProblem(http.StatusServiceUnavailable, "not_ready", c.name+" is not ready", "").Write(w)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ready\n"))
}

func tooLarge(w http.ResponseWriter, limit int64) {
	openai.NewProblem(http.StatusRequestEntityTooLarge, "request_too_large",
		"request body is larger than "+strconv.FormatInt(limit, 10)+" bytes", "").Write(w)
}
