package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/billing/internal/store"
	"github.com/switchboardhq/switchboard/internal/spine"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Applier applies one event.
type Applier interface {
	Apply(ctx context.Context, ev Event) error
}

// ErrPermanent marks a failure that retrying cannot fix: the event goes to
// the dead-letter bucket at once.
var ErrPermanent = errors.New("permanent failure")

// ConsumerConfig tunes the consumer.
type ConsumerConfig struct {
	// Durable is the consumer's name on the stream.
	Durable string
	// MaxDeliver is how often an event is tried before it is dead-lettered.
	MaxDeliver int
	// Backoff is the wait before each retry; the last one repeats.
	Backoff []time.Duration
	// HandleTimeout bounds one attempt.
	HandleTimeout time.Duration
}

// DefaultBackoff is the retry schedule of a failing event.
var DefaultBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute}

func (c *ConsumerConfig) defaults() {
	if c.Durable == "" {
		c.Durable = "billing"
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 8
	}
	if len(c.Backoff) == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.HandleTimeout <= 0 {
		c.HandleTimeout = time.Minute
	}
}

// Consumer applies the events of the stream.
type Consumer struct {
	js    jetstream.JetStream
	st    *store.Store
	apply Applier
	cfg   ConsumerConfig
	log   *slog.Logger

	applied atomic.Int64
	retried atomic.Int64
	dead    atomic.Int64
}

// NewConsumer returns a consumer; Run starts it.
func NewConsumer(js jetstream.JetStream, st *store.Store, apply Applier, cfg ConsumerConfig, log *slog.Logger) *Consumer {
	cfg.defaults()
	return &Consumer{js: js, st: st, apply: apply, cfg: cfg, log: log}
}

// Stats counts what the consumer did since it started.
type Stats struct {
	Applied, Retried, DeadLettered int64
}

// Stats returns the counters.
func (c *Consumer) Stats() Stats {
	return Stats{Applied: c.applied.Load(), Retried: c.retried.Load(), DeadLettered: c.dead.Load()}
}

// Run consumes until ctx ends, then lets the event in hand finish. A
// consumption that fails (its durable consumer could not be created while
// a cluster elects a leader, or was deleted) starts again (spine.Keep).
func (c *Consumer) Run(ctx context.Context) error {
	spine.Keep(ctx, c.log, c.cfg.Durable, c.run)
	return nil
}

func (c *Consumer) run(ctx context.Context) error {
	cons, err := c.js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable:     c.cfg.Durable,
		Description: "billing: applies Stripe events",
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     2*c.cfg.HandleTimeout + 10*time.Second,
		// Deliveries are unlimited on the server: this consumer dead-letters
		// an event itself once it is kept, so none is dropped unkept.
		MaxDeliver:    -1,
		FilterSubject: SubjectPrefix + ".>",
		MaxAckPending: 64,
	})
	if err != nil {
		return fmt.Errorf("webhook consumer: %w", err)
	}
	work := context.WithoutCancel(ctx)
	return spine.Consume(ctx, cons, func(msg jetstream.Msg) { c.handle(work, msg) }, c.log, true)
}

func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HandleTimeout)
	defer cancel()
	var deliveries uint64 = 1
	if md, err := msg.Metadata(); err == nil {
		deliveries = md.NumDelivered
	}
	ev, err := Parse(msg.Data())
	if err == nil {
		var done bool
		done, err = c.st.Processed(ctx, ev.ID)
		if err == nil && done {
			c.ack(ctx, msg, ev)
			return
		}
		if err == nil {
			err = c.apply.Apply(ctx, ev)
		}
		if err == nil {
			err = c.st.MarkProcessed(ctx, ev.ID, ev.Type)
		}
		if err == nil {
			c.applied.Add(1)
			c.ack(ctx, msg, ev)
			return
		}
	} else {
		err = fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	if errors.Is(err, ErrPermanent) || deliveries >= uint64(c.cfg.MaxDeliver) {
		c.deadLetter(ctx, msg, ev, err, deliveries)
		return
	}
	delay := c.cfg.Backoff[min(int(deliveries)-1, len(c.cfg.Backoff)-1)]
	c.retried.Add(1)
	c.log.Warn("stripe event failed, will retry", "event", ev.ID, "type", ev.Type, "delivery", deliveries, "retry_in", delay, "err", err)
	if err := msg.NakWithDelay(delay); err != nil {
		c.log.Error("nak failed; the event is redelivered after the ack wait", "event", ev.ID, "err", err)
	}
}

func (c *Consumer) ack(ctx context.Context, msg jetstream.Msg, ev Event) {
	if err := msg.DoubleAck(ctx); err != nil {
		// Not lost: the event comes again and is recognised as processed.
		c.log.Warn("ack failed", "event", ev.ID, "err", err)
	}
}

// deadLetter keeps the event in the dead-letter bucket, then ends its
// deliveries. When it cannot be kept, the event stays on the stream.
func (c *Consumer) deadLetter(ctx context.Context, msg jetstream.Msg, ev Event, cause error, deliveries uint64) {
	id := ev.ID
	if id == "" {
		if md, err := msg.Metadata(); err == nil {
			id = fmt.Sprintf("seq_%d", md.Sequence.Stream)
		}
	}
	err := c.st.PutDead(ctx, &billingv1.DeadEvent{
		EventId: id, Type: ev.Type, Payload: msg.Data(), Error: cause.Error(),
		Deliveries: deliveries, FailedAt: timestamppb.Now(),
	})
	if err != nil {
		c.log.Error("could not dead-letter a stripe event; retrying it", "event", id, "err", err)
		_ = msg.NakWithDelay(c.cfg.Backoff[len(c.cfg.Backoff)-1])
		return
	}
	c.dead.Add(1)
	c.log.Error("stripe event dead-lettered", "event", id, "type", ev.Type, "deliveries", deliveries, "err", cause)
	if err := msg.Term(); err != nil {
		c.log.Warn("term failed", "event", id, "err", err)
	}
}
