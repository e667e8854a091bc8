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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/wait"
)

// Consumer is one durable consumer of a job subject.
type Consumer[T proto.Message] struct {
	// Durable is the consumer name, shared by every worker of the fleet.
	Durable string
	// Subject filters the jobs (e.g. "sb.jobs.catalog_refresh.>").
	Subject string
	// New returns an empty job message.
	New func() T
	// Handle performs a job; an error redelivers it later.
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
	// A pull that no server took is answered "no responders": the consumer
	// had no leader to take it, as when the workers of a fleet create it
	// together on a cluster (on three members, the first pull of one of
	// two such workers, at times of both, was answered so). nats.go pulls
	// again only once two of the consumer's heartbeats went missing, 30 s
	// on, and the worker takes no job meanwhile: the pull is sent again
	// instead, after a pause that grows while pulls go unanswered.
	unheard := make(chan struct{}, 1)
	onErr := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, nats.ErrNoResponders) {
			select {
			case unheard <- struct{}{}:
			default:
			}
		}
	})
	var pause time.Duration
	for {
		started := time.Now()
		cc, err := cons.Consume(take, jetstream.PullMaxMessages(c.Concurrency), onErr)
		if err != nil {
			return fmt.Errorf("consume %s: %w", c.Durable, err)
		}
		select {
		case <-ctx.Done():
		case <-unheard:
		}
		// Stop taking messages and wait until no callback can still be
		// running (one may be waiting for a handler slot): only then is
		// every handler counted, and the deferred wait covers them all.
		cc.Stop()
		<-cc.Closed()
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > pullAgainMax {
			pause = 0 // its pulls were taken meanwhile
		}
		pause = min(max(2*pause, pullAgainMin), pullAgainMax)
		log.Debug("no server took the consumer's pull; pulling again", "in", pause)
		if !wait.Sleep(ctx, pause) {
			return nil
		}
	}
}

// The pause before a pull no server took is sent again: pullAgainMin,
// doubling while each new pull is answered so at once, to pullAgainMax.
const (
	pullAgainMin = 50 * time.Millisecond
	pullAgainMax = time.Second
)

func (c Consumer[T]) handle(ctx context.Context, msg jetstream.Msg, log *slog.Logger) {
	job := c.New()
	if err := proto.Unmarshal(msg.Data(), job); err != nil {
		log.Error("undecodable job dropped", "subject", msg.Subject(), "err", err)
		c.Metrics.count(c.Durable, outcomeDeadLettered)
		_ = msg.Term()
		return
	}
	hctx, cancel := context.WithTimeout(ctx, c.Timeout)
	err := c.Handle(hctx, job)
	cancel()
	if err == nil {
		c.Metrics.count(c.Durable, outcomeProcessed)
		if err := msg.DoubleAck(ctx); err != nil {
			log.Warn("job ack not confirmed", "subject", msg.Subject(), "err", err)
		}
		return
	}
	attempt := uint64(1)
	if md, mdErr := msg.Metadata(); mdErr == nil {
		attempt = md.NumDelivered
	}
	if attempt >= uint64(c.MaxDeliver) {
		// The server delivers it no more: say so, and end it.
		log.Error("job failed its last attempt, given up", "subject", msg.Subject(), "attempts", attempt, "err", err)
		c.Metrics.count(c.Durable, outcomeDeadLettered)
		_ = msg.Term()
		return
	}
	delay := time.Duration(1<<min(attempt, 6)) * time.Second
	c.Metrics.count(c.Durable, outcomeRetried)
	log.Warn("job failed, will retry", "subject", msg.Subject(), "attempt", attempt, "retry_in", delay, "err", err)
	_ = msg.NakWithDelay(delay)
}
