// Package billingtest runs a complete billing role for tests: an embedded
// NATS server, billing with the stateful fake Stripe of paymentstest, and a
// gRPC connection to it over an in-memory listener. Tests outside billing
// (the edge's GraphQL) drive the fake through Harness.Stripe.
package billingtest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/billing"
	"github.com/switchboardhq/switchboard/billing/internal/payments/paymentstest"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// WebhookSecret is the webhook signing secret of a Harness.
const WebhookSecret = "whsec_billingtest"

// InternalToken is the service credential of a Harness: its server admits
// only callers presenting it (as a node's does), and Harness.Conn sends it.
// Calls acting for a user name the user with rpcauth.VouchUser.
const InternalToken = "billingtest-internal-token"

// Options tune a Harness.
type Options struct {
	// NoConsumer leaves the event consumer stopped (StartConsumer starts it).
	NoConsumer bool
	// MaxDeliver and RetryBackoff tune retries (defaults: 4, 10ms).
	MaxDeliver   int
	RetryBackoff []time.Duration
	// Unconfigured starts billing without Stripe.
	Unconfigured bool
	Logger       *slog.Logger
	// Metrics and TracerProvider observe billing (nil: off).
	Metrics        prometheus.Registerer
	TracerProvider trace.TracerProvider
}

// Harness is a running billing role with a fake Stripe.
type Harness struct {
	t       testing.TB
	opts    Options
	Stripe  *paymentstest.Fake
	NATS    *nats.Conn
	Conn    *grpc.ClientConn
	Billing *billing.Billing

	mu      sync.Mutex
	stopRun context.CancelFunc
	runDone chan struct{}
}

// Start runs billing for the test; everything stops at the test's end.
func Start(t testing.TB, opts Options) *Harness {
	t.Helper()
	if opts.MaxDeliver == 0 {
		opts.MaxDeliver = 4
	}
	if opts.RetryBackoff == nil {
		opts.RetryBackoff = []time.Duration{10 * time.Millisecond}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	emb, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("billingtest: nats: %v", err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect("billingtest", opts.Logger)
	if err != nil {
		t.Fatalf("billingtest: nats connect: %v", err)
	}
	t.Cleanup(nc.Close)
	h := &Harness{t: t, opts: opts, Stripe: paymentstest.New(), NATS: nc}
	h.Billing = h.newBilling()
	h.Conn = h.serve(h.Billing)
	t.Cleanup(h.StopConsumer)
	if !opts.NoConsumer {
		h.StartConsumer()
	}
	return h
}

// serve answers gRPC calls with b over an in-memory listener until the
// test ends, and returns a connection to it.
func (h *Harness) serve(b *billing.Billing) *grpc.ClientConn {
	guard := rpcauth.NewGuard(rpcauth.GuardConfig{Token: InternalToken})
	server := grpc.NewServer(grpc.ChainUnaryInterceptor(guard.Unary()), grpc.ChainStreamInterceptor(guard.Stream()))
	b.Register(server)
	ln := bufconn.Listen(1 << 20)
	go func() { _ = server.Serve(ln) }()
	h.t.Cleanup(server.Stop)
	conn, err := grpc.NewClient("passthrough:///billing",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(rpcauth.TokenCredentials(InternalToken)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		h.t.Fatalf("billingtest: dial: %v", err)
	}
	h.t.Cleanup(func() { _ = conn.Close() })
	h.t.Cleanup(b.Close)
	return conn
}

// StartReplica runs a second billing role on the same NATS server and fake
// Stripe (without an event consumer) and returns a connection to it.
func (h *Harness) StartReplica() *grpc.ClientConn {
	h.t.Helper()
	return h.serve(h.newBilling())
}

// IdempotencyWaiters counts the calls (of any replica) waiting for a
// concurrent call with the same idempotency key: each watches its record in
// the sb_billing_idempotency bucket.
func (h *Harness) IdempotencyWaiters() int {
	h.t.Helper()
	js, err := jetstream.New(h.NATS)
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	st, err := js.Stream(context.Background(), "KV_sb_billing_idempotency")
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	return info.State.Consumers
}

// IdempotencyTTL is how long the sb_billing_idempotency bucket keeps a
// record.
func (h *Harness) IdempotencyTTL() time.Duration {
	h.t.Helper()
	js, err := jetstream.New(h.NATS)
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	kv, err := js.KeyValue(context.Background(), "sb_billing_idempotency")
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	st, err := kv.Status(context.Background())
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	return st.TTL()
}

func (h *Harness) newBilling() *billing.Billing {
	cfg := billing.Config{
		StripeWebhookSecret: WebhookSecret,
		PublicURL:           "https://switchboard.test",
		ReconcileInterval:   -1,
		MaxDeliver:          h.opts.MaxDeliver,
		RetryBackoff:        h.opts.RetryBackoff,
	}
	deps := billing.Deps{NATS: h.NATS, Logger: h.opts.Logger, Payments: h.Stripe,
		Metrics: h.opts.Metrics, Tracing: telemetry.NewTracing(h.opts.TracerProvider)}
	if h.opts.Unconfigured {
		cfg, deps = billing.Config{}, billing.Deps{Logger: h.opts.Logger}
	}
	b, err := billing.New(context.Background(), cfg, deps)
	if err != nil {
		h.t.Fatalf("billingtest: billing.New: %v", err)
	}
	return b
}

// StartConsumer starts applying events (billing's Run); after
// StopConsumer it starts again where the durable consumer stopped.
func (h *Harness) StartConsumer() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopRun != nil {
		return
	}
	b := h.Billing
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := b.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			h.t.Errorf("billingtest: billing.Run: %v", err)
		}
	}()
	h.stopRun, h.runDone = cancel, done
}

// StopConsumer stops applying events and waits until the consumer drained.
func (h *Harness) StopConsumer() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopRun == nil {
		return
	}
	h.stopRun()
	<-h.runDone
	h.stopRun = nil
}

// Sign signs a payload as Stripe would now.
func Sign(payload []byte) string {
	return SignAt(payload, time.Now())
}

// SignAt signs a payload with a chosen timestamp.
func SignAt(payload []byte, at time.Time) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: payload, Secret: WebhookSecret, Timestamp: at,
	}).Header
}

// Changes of the fake's invoices and subscriptions, for Harness.Stripe's
// UpdateInvoice and SetSubscription (callable from outside billing).
var (
	FinalizeInvoice  = paymentstest.FinalizeInvoice
	PayInvoice       = paymentstest.PayInvoice
	FailPayment      = paymentstest.FailPayment
	FailFinalization = paymentstest.FailFinalization
	VoidInvoice      = paymentstest.VoidInvoice
	EndSubscription  = paymentstest.EndSubscription
	// Unavailable is a Stripe outage error for Harness.Stripe.FailNext.
	Unavailable = paymentstest.Unavailable
)

// Operation names of Harness.Stripe.FailNext and Hold.
const (
	OpGetSubscription = paymentstest.OpGetSubscription
	OpGetInvoice      = paymentstest.OpGetInvoice
	OpCreateCheckout  = paymentstest.OpCreateCheckout
	OpListCheckouts   = paymentstest.OpListCheckouts
	OpExpireCheckout  = paymentstest.OpExpireCheckout
	OpListSubs        = paymentstest.OpListSubs
	OpCreatePortal    = paymentstest.OpCreatePortal
	OpCreateCustomer  = paymentstest.OpCreateCustomer
	OpSetCancel       = paymentstest.OpSetCancel
	OpScheduleChange  = paymentstest.OpScheduleChange
	OpReleaseSchedule = paymentstest.OpReleaseSchedule
)

// DeadEvent is an event kept after it kept failing.
type DeadEvent struct {
	EventID, Type, Error string
	Deliveries           uint64
}

// DeadEvents lists the events in the dead-letter bucket.
func (h *Harness) DeadEvents() []DeadEvent {
	h.t.Helper()
	js, err := jetstream.New(h.NATS)
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	kv, err := js.KeyValue(context.Background(), "sb_billing_dead")
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	keys, err := kv.ListKeys(context.Background())
	if err != nil {
		h.t.Fatalf("billingtest: %v", err)
	}
	var out []DeadEvent
	for k := range keys.Keys() {
		e, err := kv.Get(context.Background(), k)
		if err != nil {
			continue
		}
		var ev billingv1.DeadEvent
		if proto.Unmarshal(e.Value(), &ev) == nil {
			out = append(out, DeadEvent{EventID: ev.GetEventId(), Type: ev.GetType(), Error: ev.GetError(), Deliveries: ev.GetDeliveries()})
		}
	}
	return out
}

// BadRequestError is Stripe refusing a request, for Harness.Stripe.FailNext.
var BadRequestError = paymentsError(400, "invalid_request_error", "refused by the fake")

// MovePeriod shifts a subscription's current period by d.
var MovePeriod = paymentstest.MovePeriod
