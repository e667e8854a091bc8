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
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboardhq/switchboard/edge/internal/clitools"
	"github.com/switchboardhq/switchboard/edge/internal/console"
	"github.com/switchboardhq/switchboard/edge/internal/gateway"
	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Defaults of the request body limits.
const (
	// DefaultMaxBodyBytes caps JSON request bodies.
	DefaultMaxBodyBytes = 32 << 20
	// DefaultBodyMemoryBytes bounds the body bytes held at once.
	DefaultBodyMemoryBytes = 256 << 20
	// DefaultMinBodyRate and DefaultBodyGrace: a body must arrive at 1 KiB/s
	// on average after a 10 s grace, and never pause for longer than the
	// grace (a 25 MB upload may take 7 hours at that rate; a client
	// trickling a byte every 5 s is cut off after 10 s).
	DefaultMinBodyRate = 1 << 10
	DefaultBodyGrace   = 10 * time.Second
)

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
	// CORSOrigins are the browser origins whose pages may call the gateway
	// routes without an API key (keyed requests: any origin).
	CORSOrigins []string
	// RequireAPIKey (REQUIRE_API_KEY) refuses gateway requests without a
	// well-formed key before their body is read.
	RequireAPIKey bool
	// BodyMemoryBytes bounds the request body bytes held at once (zero:
	// DefaultBodyMemoryBytes); past it a request waits up to BodyMemoryWait
	// (zero: one second), then gets 503.
	BodyMemoryBytes int64
	BodyMemoryWait  time.Duration
	// MinBodyRate is the slowest a body may arrive, in bytes per second
	// after BodyGrace (zeros: DefaultMinBodyRate, DefaultBodyGrace).
	MinBodyRate int64
	BodyGrace   time.Duration
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
	bodies  *openai.BodyGuard
	// end cancels the requests in flight (their base context), with the
	// cause they answer with.
	end context.CancelCauseFunc
}

// endWait is how long the requests still in flight when the shutdown's
// grace period is over get to write their end once they are cancelled
// (a stream its dialect's error) before their connections are closed.
const endWait = 5 * time.Second

// streamingBody reports the routes that stream their body on instead of
// holding it (they get the rate limit, not the memory bound).
func streamingBody(r *http.Request) bool {
	return r.URL.Path == "/v1/audio/transcriptions"
}

// New builds the edge and binds its listener.
func New(ctx context.Context, cfg Config, deps Deps) (*Edge, error) {
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 15 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.BodyMemoryBytes <= 0 {
		cfg.BodyMemoryBytes = DefaultBodyMemoryBytes
	}
	// One body of the largest size must fit in the large bodies' share.
	cfg.BodyMemoryBytes = max(cfg.BodyMemoryBytes, cfg.MaxBodyBytes*4/3+1)
	if cfg.BodyMemoryWait <= 0 {
		cfg.BodyMemoryWait = time.Second
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.BodyGrace <= 0 {
		cfg.BodyGrace = DefaultBodyGrace
	}
	e := &Edge{cfg: cfg, log: deps.Logger.With("role", "edge"), core: deps.Core, billing: deps.Billing}
	base, end := context.WithCancelCause(context.WithoutCancel(ctx))
	e.end = end
	// A quarter of the bound is kept for small bodies, so large ones
	// filling the rest never keep small requests out.
	small := cfg.BodyMemoryBytes / 4
	e.bodies = &openai.BodyGuard{
		Memory:     semaphore.NewWeighted(cfg.BodyMemoryBytes - small),
		Small:      semaphore.NewWeighted(small),
		MemoryWait: cfg.BodyMemoryWait,
		MinRate:    cfg.MinBodyRate,
		Grace:      cfg.BodyGrace,
	}
	mux := newRoutes()
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
	messages := &openai.Messages{Router: corev1.NewRouterClient(deps.Core), Upstream: emb.Upstream, KeepAliveEvery: cfg.KeepAliveEvery}
	mux.Handle("POST /v1/messages", limitBody(cfg.MaxBodyBytes, messages))
	responses := &openai.Responses{Router: corev1.NewRouterClient(deps.Core), Upstream: emb.Upstream, KeepAliveEvery: cfg.KeepAliveEvery}
	mux.Handle("POST /v1/responses", limitBody(cfg.MaxBodyBytes, responses))
	mux.Handle("GET /v1/responses/{id}", &openai.GetResponse{Router: corev1.NewRouterClient(deps.Core)})
	mux.Handle("POST /v1/messages/count_tokens", limitBody(cfg.MaxBodyBytes, &openai.CountTokens{Router: corev1.NewRouterClient(deps.Core)}))
	mux.Handle("GET /ui", console.Handler()) // the admin console (edge/internal/console)
	mux.Handle("GET /ui/", console.Handler())
	if deps.Metrics != nil {
		mountMetrics(mux, deps.Metrics, cfg.AdminToken)
	}
	mountBillingAdmin(mux, deps.Billing, cfg.AdminToken, e.log) // the console's billing routes (/api/billing/...)
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
	// After the listener: the settings routes write its real address when
	// HTTPAddr asked for port 0.
	e.mountCLITools(mux, deps.Core)
	// Last: the gateway answers the other methods of every route above.
	gw, err := gateway.New(ctx, deps.Core, addUpstream, mux.withMethod)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("edge: gateway: %w", err)
	}
	mux.Handle("/", limitBody(cfg.MaxBodyBytes, gw))
	e.srv = &http.Server{
		Handler:           middleware(cfg, e.bodies, deps.Tracing, newHTTPMetrics(deps.Metrics), mux),
		MaxHeaderBytes:    serverMaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	return e, nil
}

// middleware is the chain every request passes before mux.
func middleware(cfg Config, bodies *openai.BodyGuard, tracing *telemetry.Tracing, metrics *httpMetrics, mux http.Handler) http.Handler {
	// Metrics and traces sit inside the guards, where the mux has named
	// the route; requests the guards refuse are not counted.
	return overhead(limitHeaders(cors(cfg.CORSOrigins, hostsOf(cfg.PublicURL, cfg.CORSOrigins), checkHeaders(checkKey(cfg.RequireAPIKey, checkEncoding(guardBody(bodies, streamingBody, tracing.Middleware(metrics.wrap(mux)))))))))
}

// mountCLITools serves the desktop CLI settings route, which edits files in
// the home directory of the machine the edge runs on.
func (e *Edge) mountCLITools(mux mounter, core grpc.ClientConnInterface) {
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
		publicURL = "http://" + localAddr(e.ln.Addr())
	} else if u, err := url.Parse(publicURL); err == nil && u.Port() == "0" {
		// The default public URL is http://<HTTPAddr>; with port 0 it
		// names no port a tool could reach.
		u.Host = localAddr(e.ln.Addr())
		publicURL = u.String()
	}
	mux.Handle(clitools.ClaudeSettingsPath, &clitools.ClaudeSettings{
		Admin:     corev1.NewAdminClient(core),
		Models:    corev1.NewRouterClient(core),
		PublicURL: publicURL,
		Home:      home,
	})
	mux.Handle(clitools.CodexSettingsPath, &clitools.CodexSettings{Admin: corev1.NewAdminClient(core), PublicURL: publicURL, Home: home})
}

// localAddr is the listener's address as a client on the same machine
// dials it: the real port, and loopback for a wildcard host.
func localAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Addr is the address the edge listens on.
func (e *Edge) Addr() string { return e.ln.Addr().String() }

// Run serves until ctx ends, then stops listening and drains in-flight
// requests for at most the shutdown timeout. The requests still in flight
// then are ended: a stream with its dialect's in-band error saying the
// gateway is shutting down (a 503 the client may send again elsewhere),
// never a cut, and core's call is cancelled, so it records the usage of
// what was streamed as for a client that left. That is still the orderly
// stop the operator asked for: Run returns no error for it.
func (e *Edge) Run(ctx context.Context) error {
	defer e.end(nil)
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
	err := e.srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		e.log.Warn("shutdown timeout over: ending the requests still in flight", "timeout", e.cfg.ShutdownTimeout)
		e.end(openai.ErrShuttingDown)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endWait)
		err = e.srv.Shutdown(ectx)
		cancel()
		if err != nil {
			// A client that does not read its end (its writes block).
			e.log.Warn("closing the connections of requests that did not end", "wait", endWait)
			err = e.srv.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("edge: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readyz answers 200 once core, which every gateway route needs, answers
// health checks. Billing is reported but never makes the edge unready: a
// load balancer must not take the OpenAI gateway out because billing is
// restarting (GraphQL answers BILLING_UNAVAILABLE meanwhile).
func (e *Edge) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	serving := func(conn grpc.ClientConnInterface, service string) bool {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
	if e.core != nil && !serving(e.core, corev1.Router_ServiceDesc.ServiceName) {
		openai.NewProblem(http.StatusServiceUnavailable, "not_ready", "core is not ready", "").Write(w)
		return
	}
	body := "ready\n"
	if e.billing != nil && !serving(e.billing, billingv1.Billing_ServiceDesc.ServiceName) {
		body += "billing: degraded (billing calls answer BILLING_UNAVAILABLE)\n"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(body))
}

func tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	openai.TooLarge(limit).WriteFor(w, r)
}
