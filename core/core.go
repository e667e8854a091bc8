// Package core is the core role: model routing, provider connections and
// their secrets, API keys, machines, settings and model catalogs. It serves
// the switchboard.core.v1 Router and Admin gRPC services.
package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/apikey"
	"github.com/switchboardhq/switchboard/core/internal/audio"
	"github.com/switchboardhq/switchboard/core/internal/catalog"
	"github.com/switchboardhq/switchboard/core/internal/caveman"
	"github.com/switchboardhq/switchboard/core/internal/chat"
	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/embeddings"
	"github.com/switchboardhq/switchboard/core/internal/grpcapi"
	"github.com/switchboardhq/switchboard/core/internal/jobs"
	"github.com/switchboardhq/switchboard/core/internal/lifecycle"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/usage"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// defaultMachineKey is the sb_machines key naming the default machine. It is
// not a machine id (those are 16 hex characters), so it cannot collide.
const defaultMachineKey = "default"

// Config configures core.
type Config struct {
	// AdminToken guards the Admin service.
	AdminToken string
	// SecretKey (32 bytes) seals provider secrets and keys API key checksums.
	SecretKey []byte
	// RequireAPIKey forces API keys on every machine (REQUIRE_API_KEY).
	RequireAPIKey bool
	// Replicas of core's streams and buckets.
	Replicas int
	// FirstByteTimeout bounds the wait for an upstream's response headers
	// (zero: upstream.Gateway's).
	FirstByteTimeout time.Duration
	// WholeAnswerTimeout bounds it instead for a whole (non-streamed)
	// answer, whose headers come only once it is written (zero:
	// upstream.Gateway's).
	WholeAnswerTimeout time.Duration
	// MaxAudioBytes caps a transcription upload (zero:
	// audio.DefaultMaxBytes).
	MaxAudioBytes int64
	// StallTimeout ends a started stream whose upstream went silent, and an
	// upstream call whose body, its headers sent, stops coming (zero:
	// chat.DefaultStallTimeout).
	StallTimeout time.Duration
	// CatalogScanEvery is how often the catalogs kept fresh near their
	// expiry are queued for a fetch (zero: every minute).
	CatalogScanEvery time.Duration
	// TokenScanEvery is how often OAuth connections are checked for tokens
	// within their provider's refresh lead time (zero:
	// lifecycle.DefaultScanEvery).
	TokenScanEvery time.Duration
	// Usage bounds the usage pipeline.
	Usage UsageConfig
	// ResponsesMaxBytes bounds the stored Responses answers on disk (zero:
	// spine.DefaultResponsesMaxBytes); past it the oldest go first.
	ResponsesMaxBytes int64
	// OAuth overrides the OAuth login table (endpoints, client ids) of
	// internal/oauth.
	OAuth oauth.Overrides
}

// UsageConfig bounds the usage pipeline; zero values take the defaults.
type UsageConfig struct {
	// MaxBytes bounds SB_USAGE on disk (spine.DefaultUsageMaxBytes).
	MaxBytes int64
	// BufferEvents bounds the usage events waiting in core while NATS is
	// away (usage.DefaultMaxEvents); past it new events are dropped and
	// counted.
	BufferEvents int
}

// Deps are what core is built on.
type Deps struct {
	NATS   *nats.Conn
	Logger *slog.Logger
	// Metrics is the process's registry (nil: not counted); see metrics.go.
	Metrics prometheus.Registerer
	// Tracing traces resolutions, attempts and token refreshes, and carries
	// the trace to upstreams (nil: off).
	Tracing *telemetry.Tracing
}

// Core is a running core role.
type Core struct {
	router    *grpcapi.Router
	admin     *grpcapi.Admin
	usage     *usage.Publisher
	lister    *catalog.Lister
	scanEvery time.Duration
	defaultID string
	log       *slog.Logger
	stop      context.CancelFunc

	// tokens enqueues proactive token refreshes every tokenScanEvery.
	tokens         *lifecycle.Scheduler
	tokenScanEvery time.Duration
}

// New prepares core: the spine's streams and buckets, the in-memory mirror of
// its state, and the default machine.
func New(ctx context.Context, cfg Config, deps Deps) (*Core, error) {
	if cfg.AdminToken == "" {
		return nil, errors.New("core: admin token is required")
	}
	box, err := secrets.NewBox(cfg.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("core: %w", err)
	}
	log := deps.Logger.With("role", "core")
	js, err := jetstream.New(deps.NATS)
	if err != nil {
		return nil, fmt.Errorf("core: jetstream: %w", err)
	}
	if err := (spine.Topology{Replicas: cfg.Replicas, UsageMaxBytes: cfg.Usage.MaxBytes, ResponsesMaxBytes: cfg.ResponsesMaxBytes}).Ensure(ctx, js); err != nil {
		return nil, fmt.Errorf("core: %w", err)
	}
	// The mirror lives as long as core, not as long as the start-up context.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	st, err := openStore(ctx, life, js, log)
	if err != nil {
		stop()
		return nil, err
	}
	defaultID, err := ensureDefaultMachine(ctx, st)
	if err != nil {
		stop()
		return nil, fmt.Errorf("core: default machine: %w", err)
	}
	logins, err := oauth.NewProviders(cfg.OAuth)
	if err != nil {
		stop()
		return nil, fmt.Errorf("core: %w", err)
	}
	keySecret := secrets.Derive(cfg.SecretKey, "api-key-checksum")
	reg := provider.NewRegistry()
	auth := grpcapi.NewAuthenticator(st, keySecret, cfg.AdminToken, cfg.RequireAPIKey, defaultID)
	jobPub := jobs.NewPublisher(js)
	lister := catalog.NewLister(st, reg, jobPub, log)
	v := vault.New(box)
	// Earlier releases kept a connection's proxy URL (which may hold a
	// password) in plain text: seal what is left of that.
	if n := st.SealLegacy(ctx, v.SealLegacy, log); n > 0 {
		log.Info("sealed the plain-text proxy URLs of connections", "connections", n)
	}
	cooldowns := store.NewCooldowns(st.Cooldowns)
	opts := timeouts(cfg)
	opts.Wrap = deps.Tracing.Transport
	clients := upstream.NewClients(opts)
	resolver := routing.NewResolver(st, reg)
	disp := dispatch.New(st, resolver, cooldowns, jobPub, v, clients, log).
		Instrument(dispatch.NewMetrics(deps.Metrics), deps.Tracing.Tracer("switchboard/core"))
	use, err := usage.NewPublisher(js, usage.Config{MaxEvents: cfg.Usage.BufferEvents}, log)
	if err != nil {
		stop()
		return nil, fmt.Errorf("core: %w", err)
	}
	stored, err := js.KeyValue(ctx, spine.BucketResponses)
	if err != nil {
		stop()
		return nil, fmt.Errorf("core: %w", err)
	}
	affinity, err := js.KeyValue(ctx, spine.BucketAffinity)
	if err != nil {
		stop()
		return nil, fmt.Errorf("core: %w", err)
	}
	signIns, err := js.KeyValue(ctx, spine.BucketSignInCodes)
	if err != nil {
		stop()
		return nil, fmt.Errorf("core: %w", err)
	}
	chatSvc := chat.New(disp, chat.Options{StallTimeout: cfg.StallTimeout, FirstEventTimeout: cfg.FirstByteTimeout,
		Responses: chat.KVResponses{KV: stored, JS: js}, Affinity: chat.KVAffinity{KV: affinity, JS: js}, Log: log})
	c := &Core{
		scanEvery: cmp.Or(cfg.CatalogScanEvery, time.Minute),
		lister:    lister,
		router: grpcapi.NewRouter(grpcapi.RouterDeps{
			Auth:       auth,
			Catalog:    lister,
			Embeddings: embeddings.New(disp, embeddings.Options{StallTimeout: cfg.StallTimeout}),
			Chat:       chatSvc,
			Audio:      audio.New(disp, audio.Options{MaxBytes: cfg.MaxAudioBytes, StallTimeout: cfg.StallTimeout}),
			Caveman:    cavemanLevel(st),
			Usage:      use,
			Log:        log,
			Metrics:    grpcapi.NewRequestMetrics(deps.Metrics, resolver.Known),
		}),
		admin:     grpcapi.NewAdmin(auth, st, v, cooldowns, lister, keySecret, reg, log).WithUpstream(clients).WithUsageHealth(usage.NewHealth(use, js)).EnableSignInCodes(js, signIns),
		usage:     use,
		defaultID: defaultID,
		log:       log,
		stop:      stop,
	}
	registerCollectors(deps.Metrics, cooldowns, use)
	// The same publisher as reactive refreshes: one job per connection and
	// token generation, whichever asks first.
	c.tokens, c.tokenScanEvery = lifecycle.New(st.Connections, reg, jobPub, log), cfg.TokenScanEvery
	c.admin.EnableOAuth(grpcapi.OAuthDeps{
		Providers: logins,
		Box:       box,
		// A token endpoint must not send codes or tokens elsewhere.
		Clients: upstream.NewClients(upstream.Options{FirstByte: oauth.CallTimeout, NoRedirects: true}),
	})
	c.admin.EnableRequestLog(js)
	log.Info("core ready", "default_machine", defaultID)
	return c, nil
}

// openStore mirrors the buckets, giving up when ctx ends but keeping the
// mirror alive until life ends.
func openStore(ctx, life context.Context, js jetstream.JetStream, log *slog.Logger) (*store.Store, error) {
	type result struct {
		st  *store.Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := store.Open(life, js, log)
		done <- result{st, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("core: %w", r.err)
		}
		return r.st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ensureDefaultMachine creates the default machine on first start. Replicas
// racing at first start agree through the create-if-absent of its pointer.
func ensureDefaultMachine(ctx context.Context, st *store.Store) (string, error) {
	if e, ok := st.Machines.Get(defaultMachineKey); ok {
		return e.Value.GetId(), nil
	}
	id, err := apikey.NewMachineID()
	if err != nil {
		return "", err
	}
	m := &busv1.Machine{Id: id, Name: "default", IsDefault: true, CreatedAt: timestamppb.Now()}
	if err := st.Machines.Create(ctx, defaultMachineKey, m); err != nil && !errors.Is(err, kvmirror.ErrExists) {
		return "", err
	}
	// Another core starting at the same time may have won the create; its
	// pointer reaches this mirror shortly.
	e, err := awaitEntry(ctx, st.Machines, defaultMachineKey)
	if err != nil {
		return "", fmt.Errorf("default machine pointer missing after create: %w", err)
	}
	m = e.Value
	if err := st.Machines.Create(ctx, m.GetId(), m); err != nil && !errors.Is(err, kvmirror.ErrExists) {
		return "", err
	}
	if err := st.Settings.Create(ctx, m.GetId(), &busv1.Settings{}); err != nil && !errors.Is(err, kvmirror.ErrExists) {
		return "", err
	}
	return m.GetId(), nil
}

// awaitEntry is key's entry once the mirror has it.
func awaitEntry(ctx context.Context, b *kvmirror.Bucket[*busv1.Machine], key string) (kvmirror.Entry[*busv1.Machine], error) {
	for {
		ch := b.Changed()
		if e, ok := b.Get(key); ok {
			return e, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return kvmirror.Entry[*busv1.Machine]{}, ctx.Err()
		}
	}
}

// Register adds core's services to a gRPC server.
func (c *Core) Register(s grpc.ServiceRegistrar) {
	corev1.RegisterRouterServer(s, c.router)
	corev1.RegisterAdminServer(s, c.admin)
}

// RequestIDInterceptors tell a network caller of core's Router the id its
// request is logged under (response header x-request-id); for core's
// network server, after authentication.
func RequestIDInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return grpcapi.RequestIDUnary(), grpcapi.RequestIDStream()
}

// DefaultMachineID is the machine that requests without a key run as.
func (c *Core) DefaultMachineID() string { return c.defaultID }

// Run serves until ctx ends, then publishes the usage events still
// buffered (events recorded meanwhile included, for at most the drain
// timeout) and stops the state mirror. For a shutdown that loses no usage,
// end ctx only after the gRPC server's graceful stop, and close the NATS
// connection only after Run has returned.
func (c *Core) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.refreshCatalogs(ctx)
	}()
	tokensDone := make(chan struct{})
	go func() {
		defer close(tokensDone)
		c.tokens.Run(ctx, c.tokenScanEvery)
	}()
	// Returns once every buffered event is published (or the drain timed
	// out): the caller may close NATS after Run returns.
	c.usage.Run(ctx)
	<-done
	<-tokensDone
	c.stop()
	return nil
}

// EndLoginsWith ends the OAuth logins in flight, which outlive the call
// that claimed them, when serving ends. Call it before serving: serving is
// the process's signal to shut down, which comes before the drain.
func (c *Core) EndLoginsWith(serving context.Context) { c.admin.EndLoginsWith(serving) }

// Close stops core's state mirror; Run does it too when its context ends.
func (c *Core) Close() { c.stop() }

// CatalogLead is how long before a live catalog expires that it is fetched
// again, so listings rarely wait for one.
const CatalogLead = 10 * time.Minute

// refreshCatalogs enqueues fetches of the catalogs about to expire that are
// kept fresh (catalog.Lister.RefreshExpiring) until ctx ends.
func (c *Core) refreshCatalogs(ctx context.Context) {
	t := time.NewTicker(c.scanEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if n := c.lister.RefreshExpiring(ctx, CatalogLead); n > 0 {
				c.log.Debug("catalog refreshes enqueued", "count", n)
			}
		case <-ctx.Done():
			return
		}
	}
}

func timeouts(cfg Config) upstream.Options {
	o := upstream.Gateway
	if cfg.FirstByteTimeout > 0 {
		o.FirstByte = cfg.FirstByteTimeout
	}
	if cfg.WholeAnswerTimeout > 0 {
		o.WholeAnswer = cfg.WholeAnswerTimeout
	}
	return o
}

// cavemanLevel resolves the terse-output level of a machine's request on a
// connection: the machine's setting, unless the connection overrides it.
func cavemanLevel(st *store.Store) func(machineID string, c *busv1.Connection) string {
	return func(machineID string, c *busv1.Connection) string {
		s := st.MachineSettings(machineID)
		var o *caveman.Override
		if co := c.GetData().GetCaveman(); co != nil {
			o = &caveman.Override{Enabled: co.Enabled, Level: co.GetLevel()}
		}
		level, on := caveman.Resolve(s.GetCavemanEnabled(), s.GetCavemanLevel(), o)
		if !on {
			return ""
		}
		return level
	}
}
