// Package jobs consumes the SB_JOBS work queue: each job is handled by one
// worker of the fleet, acknowledged only once done, and redelivered with
// backoff when its handler fails or its worker dies.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
)

// MaxRetryAfter bounds the wait a handler's error may ask for before its
// job is redelivered.
const MaxRetryAfter = time.Hour

// Consumer is one durable consumer of a job subject.
type Consumer[T proto.Message] struct {
	// Durable is the consumer name, shared by every worker of the fleet.
	Durable string
	// Subject filters the jobs (e.g. "sb.jobs.catalog_refresh.>").
	Subject string
	// New returns an empty job message.
	New func() T
	// Handle performs a job; an error redelivers it later, no sooner than
	// its RetryAfter() time.Duration when it has one (bounded by
	// MaxRetryAfter).
	Handle func(ctx context.Context, job T) error
	// Concurrency bounds the jobs handled at once.
	Concurrency int
	// Timeout bounds one handling.
	Timeout time.Duration
	// MaxDeliver bounds the attempts of one job (10); a job whose last
	// attempt fails is logged as given up and ended.
	MaxDeliver int
	// Metrics counts the outcomes (nil: not counted).
	Metrics *Metrics
}

// Run consumes until ctx ends, then stops taking jobs and waits for the ones
// in flight.
func (c Consumer[T]) Run(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 10
	}
	log = log.With("consumer", c.Durable)
	cons, err := js.CreateOrUpdateConsumer(ctx, spine.StreamJobs, jetstream.ConsumerConfig{
		Durable:       c.Durable,
		FilterSubject: c.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.Timeout + 10*time.Second,
		MaxDeliver:    c.MaxDeliver,
		MaxAckPending: c.Concurrency * 4,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("consumer %s: %w", c.Durable, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, c.Concurrency)
	// Handlers outlive a cancelled ctx so that jobs in flight finish.
	work := context.WithoutCancel(ctx)
	take := func(msg jetstream.Msg) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.handle(work, msg, log)
		}()
	}
	// Stop (not drain): a message pulled but not handed on goes to
	// another worker once its ack wait ends, where a drain would wait for
	// handler slots; the deferred wait covers every handler started.
	return spine.Consume(ctx, cons, take, log, false, jetstream.PullMaxMessages(c.Concurrency))
}

func (c Consumer[T]) handle(ctx context.Context, msg jetstream.Msg, log *slog.Logger) {
	job := c.New()
	if err := proto.Unmarshal(msg.Data(), job); err != nil {
		log.Error("undecodable job dropped", "subject", msg.Subject(), "err", err)
		c.Metrics.count(c.Durable, outcomeDeadLettered)
		_ = msg.Term()
		return
	}
	attempt := uint64(1)
	if md, mdErr := msg.Metadata(); mdErr == nil {
		attempt = md.NumDelivered
	}
	last := attempt >= uint64(c.MaxDeliver)
	hctx, cancel := context.WithTimeout(ctx, c.Timeout)
	if last {
		hctx = AsLastAttempt(hctx)
	}
	err := c.Handle(hctx, job)
	cancel()
	if err == nil {
		c.Metrics.count(c.Durable, outcomeProcessed)
		if err := msg.DoubleAck(ctx); err != nil {
			log.Warn("job ack not confirmed", "subject", msg.Subject(), "err", err)
		}
		return
	}
	if last {
		// The server delivers it no more: say so, and end it.
		log.Error("job failed its last attempt, given up", "subject", msg.Subject(), "attempts", attempt, "err", err)
		c.Metrics.count(c.Durable, outcomeDeadLettered)
		_ = msg.Term()
		return
	}
	delay := time.Duration(1<<min(attempt, 6)) * time.Second
	var later interface{ RetryAfter() time.Duration }
	if errors.As(err, &later) {
		// The handler knows when a retry may succeed (a rate-limited
		// endpoint's Retry-After): no sooner.
		delay = max(delay, min(later.RetryAfter(), MaxRetryAfter))
	}
	c.Metrics.count(c.Durable, outcomeRetried)
	log.Warn("job failed, will retry", "subject", msg.Subject(), "attempt", attempt, "retry_in", delay, "err", err)
	_ = msg.NakWithDelay(delay)
}

// lastAttemptKey marks a handling as its job's last attempt.
type lastAttemptKey struct{}

// AsLastAttempt marks ctx as a job's last attempt: an error ends the job
// rather than redelivering it.
func AsLastAttempt(ctx context.Context) context.Context {
	return context.WithValue(ctx, lastAttemptKey{}, true)
}

// LastAttempt reports whether a handler runs its job's last attempt: one
// whose failures are otherwise retried records what it has to say of the
// failure now, as no attempt follows.
func LastAttempt(ctx context.Context) bool {
	last, _ := ctx.Value(lastAttemptKey{}).(bool)
	return last
}
