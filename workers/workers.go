// Package workers is the workers role: it takes jobs from the SB_JOBS queue
// (catalog refresh now; token refresh and usage roll-ups as they arrive) and
// writes results back through core's admin API.
package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/spine"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
	"github.com/switchboardhq/switchboard/workers/internal/catalogrefresh"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
)

// Config configures the workers.
type Config struct {
	// AdminToken authenticates the workers to core's admin API.
	AdminToken string
	// Replicas of the streams the workers use.
	Replicas int
	// Concurrency bounds the jobs of one kind handled at once.
	Concurrency int
}

// Deps are what the workers are built on.
type Deps struct {
	NATS *nats.Conn
	// Core is a connection to core's gRPC services.
	Core   grpc.ClientConnInterface
	Logger *slog.Logger
}

// Workers is a running workers role.
type Workers struct {
	js      jetstream.JetStream
	catalog *catalogrefresh.Refresher
	cfg     Config
	log     *slog.Logger
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
	if err := spine.EnsureStreams(ctx, js, (spine.Topology{Replicas: cfg.Replicas}).Streams()...); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	log := deps.Logger.With("role", "worker")
	client := &http.Client{Transport: upstreamTransport()}
	return &Workers{
		js:      js,
		catalog: catalogrefresh.New(corev1.NewAdminClient(deps.Core), cfg.AdminToken, provider.NewRegistry(), client, log),
		cfg:     cfg,
		log:     log,
	}, nil
}

// Run takes jobs until ctx ends, then finishes the ones in flight.
func (w *Workers) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return jobs.Consumer[*busv1.CatalogRefreshJob]{
			Durable:     "catalog-refresh",
			Subject:     spine.SubjectCatalogRefresh + ".>",
			New:         func() *busv1.CatalogRefreshJob { return new(busv1.CatalogRefreshJob) },
			Handle:      w.catalog.Handle,
			Concurrency: w.cfg.Concurrency,
			Timeout:     catalogrefresh.FetchTimeout + 10*time.Second,
		}.Run(ctx, w.js, w.log)
	})
	w.log.Info("workers running")
	return g.Wait()
}

// upstreamTransport is the transport for upstream calls made by workers.
func upstreamTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}
}
