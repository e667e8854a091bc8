// Package workers is the workers role: it takes jobs from the SB_JOBS queue
// (catalog and token refresh) and events from the SB_USAGE stream (usage
// roll-ups), and writes results back through core's admin API.
package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/spine"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
	"github.com/switchboardhq/switchboard/workers/internal/catalogrefresh"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
	"github.com/switchboardhq/switchboard/workers/internal/tokenrefresh"
	"github.com/switchboardhq/switchboard/workers/internal/usage"
)

// Config configures the workers.
type Config struct {
	// AdminToken authenticates the workers to core's admin API.
	AdminToken string
	// Replicas of the streams the workers use.
	Replicas int
	// UsageMaxBytes bounds SB_USAGE on disk (zero: the spine's default); it
	// must match core's.
	UsageMaxBytes int64
	// Concurrency bounds the jobs of one kind handled at once.
	Concurrency int
	// JobTimeout, when positive, bounds one job of every kind instead of
	// each kind's own bound. A job is redelivered once it has gone 10 s
	// past it unacknowledged (its worker died).
	JobTimeout time.Duration
	// OAuth overrides the OAuth login table, as core's Config.OAuth does
	// (the same configuration): token refreshes send the client secrets
	// it names.
	OAuth oauth.Overrides
}

// Deps are what the workers are built on.
type Deps struct {
	NATS *nats.Conn
	// Core is a connection to core's gRPC services.
	Core   grpc.ClientConnInterface
	Logger *slog.Logger
	// Metrics is the process's registry (nil: not counted).
	Metrics prometheus.Registerer
}

// Workers is a running workers role.
type Workers struct {
	js      jetstream.JetStream
	catalog *catalogrefresh.Refresher
	tokens  *tokenrefresh.Refresher
	usage   *usage.Roller
	cfg     Config
	log     *slog.Logger
	metrics *jobs.Metrics
}

// New prepares the workers.
func New(ctx context.Context, cfg Config, deps Deps) (*Workers, error) {
	if cfg.AdminToken == "" {
		return nil, errors.New("workers: admin token is required")
	}
	js, err := jetstream.New(deps.NATS)
	if err != nil {
		return nil, fmt.Errorf("workers: jetstream: %w", err)
	}
	top := spine.Topology{Replicas: cfg.Replicas, UsageMaxBytes: cfg.UsageMaxBytes}
	if err := spine.EnsureStreams(ctx, js, top.Streams()...); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	if err := spine.EnsureBuckets(ctx, js, top.RefreshLeases()); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	leases, err := js.KeyValue(ctx, spine.BucketRefreshLeases)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	logins, err := oauth.NewProviders(cfg.OAuth)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	log := deps.Logger.With("role", "worker")
	admin := corev1.NewAdminClient(deps.Core)
	return &Workers{
		js:      js,
		catalog: catalogrefresh.New(admin, cfg.AdminToken, provider.NewRegistry(), catalogrefresh.NewClients(), log),
		tokens: tokenrefresh.New(admin, cfg.AdminToken, tokenrefresh.NewClients(), log).
			WithLeases(tokenrefresh.KVLeases{KV: leases, JS: js}, uuid.NewString()).
			WithProviders(logins),
		usage:   usage.New(admin, cfg.AdminToken, usage.Config{Lost: usage.NewLostCounter(deps.Metrics)}, log),
		cfg:     cfg,
		log:     log,
		metrics: jobs.NewMetrics(deps.Metrics),
	}, nil
}

// Run takes jobs until ctx ends, then finishes the ones in flight.
func (w *Workers) Run(ctx context.Context) error {
	var g errgroup.Group
	g.Go(func() error {
		return w.keep(ctx, "catalog-refresh", jobs.Consumer[*busv1.CatalogRefreshJob]{
			Durable:     "catalog-refresh",
			Subject:     spine.SubjectCatalogRefresh + ".>",
			New:         func() *busv1.CatalogRefreshJob { return new(busv1.CatalogRefreshJob) },
			Handle:      w.catalog.Handle,
			Concurrency: w.cfg.Concurrency,
			Timeout:     w.jobTimeout(catalogrefresh.FetchTimeout + 10*time.Second),
			Metrics:     w.metrics,
		}.Run)
	})
	g.Go(func() error {
		return w.keep(ctx, "token-refresh", jobs.Consumer[*busv1.TokenRefreshJob]{
			Durable:     "token-refresh",
			Subject:     spine.SubjectTokenRefresh + ".>",
			New:         func() *busv1.TokenRefreshJob { return new(busv1.TokenRefreshJob) },
			Handle:      w.tokens.Handle,
			Concurrency: w.cfg.Concurrency,
			Timeout:     w.jobTimeout(tokenrefresh.JobTimeout),
			Metrics:     w.metrics,
		}.Run)
	})
	g.Go(func() error {
		return w.keep(ctx, "usage-rollup", func(ctx context.Context, js jetstream.JetStream, _ *slog.Logger) error {
			return w.usage.Run(ctx, js)
		})
	})
	w.log.Info("workers running")
	return g.Wait()
}

// keep runs one consumer until ctx ends, starting it again when it fails
// (spine.Keep).
func (w *Workers) keep(ctx context.Context, name string, run func(context.Context, jetstream.JetStream, *slog.Logger) error) error {
	spine.Keep(ctx, w.log, name, func(ctx context.Context) error { return run(ctx, w.js, w.log) })
	return nil
}

// jobTimeout is the configured bound on a job, else def.
func (w *Workers) jobTimeout(def time.Duration) time.Duration {
	if w.cfg.JobTimeout > 0 {
		return w.cfg.JobTimeout
	}
	return def
}
