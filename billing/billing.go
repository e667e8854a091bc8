// Package billing is the billing role: Stripe customers, subscriptions and
// invoices of signed-in users behind the switchboard.billing.v1 Billing gRPC
// service, the intake of Stripe webhooks onto the SB_STRIPE stream, the
// consumer that applies them, and a periodic reconciliation with Stripe.
package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/billing/internal/account"
	"github.com/switchboardhq/switchboard/billing/internal/grpcapi"
	"github.com/switchboardhq/switchboard/billing/internal/idempotency"
	"github.com/switchboardhq/switchboard/billing/internal/payments"
	"github.com/switchboardhq/switchboard/billing/internal/store"
	"github.com/switchboardhq/switchboard/billing/internal/webhook"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Config configures billing.
type Config struct {
	// StripeSecretKey (STRIPE_SECRET_KEY); without it billing is off and
	// every call answers BILLING_NOT_CONFIGURED.
	StripeSecretKey string
	// StripeWebhookSecret (STRIPE_WEBHOOK_SECRET) verifies webhook
	// deliveries; without it deliveries are refused.
	StripeWebhookSecret string
	// StripeAPIBase (STRIPE_API_BASE) replaces https://api.stripe.com.
	StripeAPIBase string
	// PublicURL (SWITCHBOARD_PUBLIC_URL) is the base of checkout and portal
	// return links.
	PublicURL string
	// Replicas of billing's stream and buckets.
	Replicas int

	// ReconcileInterval is how often subscriptions that have not ended are
	// re-read from Stripe; 0 means hourly, negative turns it off.
	ReconcileInterval time.Duration
	// MaxDeliver is how often a failing event is tried before it is kept in
	// the dead-letter bucket; 0 means 8.
	MaxDeliver int
	// RetryBackoff is the wait before each retry of a failing event (the
	// last repeats); nil means 1s, 5s, 30s, 2m, 10m, 30m.
	RetryBackoff []time.Duration
	// SignatureTolerance is how old a delivery's signature may be; 0 means
	// 5 minutes.
	SignatureTolerance time.Duration
}

// Deps are what billing is built on.
type Deps struct {
	NATS   *nats.Conn
	Logger *slog.Logger
	// Payments replaces the Stripe client (tests); leave it nil.
	Payments payments.Provider
	// Metrics is the process's registry (nil: not counted).
	Metrics prometheus.Registerer
	// Tracing traces the webhook consumer (nil: off).
	Tracing *telemetry.Tracing
}

// Billing is a built billing role.
type Billing struct {
	cfg      Config
	log      *slog.Logger
	server   *grpcapi.Server
	acct     *account.Service
	consumer *webhook.Consumer
	stop     context.CancelFunc
	runMu    sync.Mutex
}

// New prepares billing: the Stripe client, the stream and buckets and the
// in-memory mirror of its state. Without a Stripe key (and no Deps.Payments)
// it builds a service that only answers BILLING_NOT_CONFIGURED and touches
// neither Stripe nor NATS.
func New(ctx context.Context, cfg Config, deps Deps) (*Billing, error) {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("role", "billing")
	b := &Billing{cfg: cfg, log: log, stop: func() {}}
	pay := deps.Payments
	if pay == nil && cfg.StripeSecretKey != "" {
		st, err := payments.NewStripe(payments.StripeConfig{SecretKey: cfg.StripeSecretKey, APIBase: cfg.StripeAPIBase, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("billing: %w", err)
		}
		pay = st
	}
	if pay == nil {
		log.Info("billing is not configured (no STRIPE_SECRET_KEY); billing calls answer BILLING_NOT_CONFIGURED")
		b.server = grpcapi.NewServer(nil, nil, nil, nil, log)
		return b, nil
	}
	if deps.NATS == nil {
		return nil, errors.New("billing: a NATS connection is required")
	}
	js, err := jetstream.New(deps.NATS)
	if err != nil {
		return nil, fmt.Errorf("billing: jetstream: %w", err)
	}
	if err := spine.EnsureStreams(ctx, js, webhook.StreamConfig(cfg.Replicas)); err != nil {
		return nil, fmt.Errorf("billing: %w", err)
	}
	if err := spine.EnsureBuckets(ctx, js, store.Buckets(cfg.Replicas)...); err != nil {
		return nil, fmt.Errorf("billing: %w", err)
	}
	// The mirror lives as long as billing, not as long as the start-up context.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	st, err := openStore(ctx, life, js, log)
	if err != nil {
		stop()
		return nil, err
	}
	if cfg.StripeWebhookSecret == "" {
		log.Warn("STRIPE_WEBHOOK_SECRET is not set: webhook deliveries are refused")
	}
	idemKV, err := js.KeyValue(ctx, store.BucketIdempotency)
	if err != nil {
		stop()
		return nil, fmt.Errorf("billing: open bucket %s: %w", store.BucketIdempotency, err)
	}
	b.stop = stop
	b.acct = account.New(pay, st, account.Config{PublicURL: cfg.PublicURL}, log)
	// Mutations called with an idempotency key run once per user and key.
	idem := idempotency.New(b.acct, idemKV, idempotency.Config{}, log)
	b.server = grpcapi.NewServer(b.acct, idem, webhook.NewIntake(js, cfg.StripeWebhookSecret, cfg.SignatureTolerance),
		webhook.NewDeadLetters(js, st), log)
	b.consumer = webhook.NewConsumer(js, st, webhook.Traced(webhook.NewDispatcher(b.acct, log), deps.Tracing.Tracer("switchboard/billing")), webhook.ConsumerConfig{
		MaxDeliver: cfg.MaxDeliver,
		Backoff:    cfg.RetryBackoff,
	}, log)
	telemetry.Registerer(deps.Metrics).MustRegister(b.consumer.Collector())
	log.Info("billing ready")
	return b, nil
}

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
			return nil, fmt.Errorf("billing: %w", r.err)
		}
		return r.st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Configured reports whether billing talks to Stripe.
func (b *Billing) Configured() bool { return b.acct != nil }

// Register adds the Billing service to a gRPC server.
func (b *Billing) Register(s grpc.ServiceRegistrar) {
	billingv1.RegisterBillingServer(s, b.server)
}

// Run applies Stripe events from the bus and reconciles subscriptions until
// ctx ends, then lets the event in hand finish. The gRPC service keeps
// answering after Run returned (until Close). Events that arrive while no
// consumer runs wait on the bus; the next Run, of this process or of
// another replica, applies them.
func (b *Billing) Run(ctx context.Context) error {
	if b.acct == nil {
		<-ctx.Done()
		return nil
	}
	b.runMu.Lock()
	defer b.runMu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return b.consumer.Run(gctx) })
	if b.cfg.ReconcileInterval >= 0 {
		g.Go(func() error { b.reconcileLoop(gctx); return nil })
	}
	return g.Wait()
}

func (b *Billing) reconcileLoop(ctx context.Context) {
	every := b.cfg.ReconcileInterval
	if every == 0 {
		every = time.Hour
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := b.acct.Reconcile(ctx)
			if err != nil {
				b.log.Warn("reconciliation had failures", "subscriptions", n, "err", err)
			} else {
				b.log.Debug("reconciled subscriptions", "subscriptions", n)
			}
		}
	}
}

// Close stops the in-memory mirror of billing's state. Call it once the
// gRPC server stopped; the service must not be used afterwards.
func (b *Billing) Close() { b.stop() }

// Reconcile re-reads every subscription that has not ended from Stripe now.
func (b *Billing) Reconcile(ctx context.Context) error {
	if b.acct == nil {
		return account.ErrNotConfigured
	}
	_, err := b.acct.Reconcile(ctx)
	return err
}

// EventStats counts the webhook events applied, retried and dead-lettered
// since billing started.
type EventStats struct {
	Applied, Retried, DeadLettered int64
}

// EventStats returns the consumer's counters.
func (b *Billing) EventStats() EventStats {
	if b.consumer == nil {
		return EventStats{}
	}
	s := b.consumer.Stats()
	return EventStats{Applied: s.Applied, Retried: s.Retried, DeadLettered: s.DeadLettered}
}
