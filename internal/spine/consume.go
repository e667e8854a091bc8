package spine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/internal/wait"
)

// ErrConsumeEnded is a consumption that ended before its context: the
// consumer is gone and must be created again.
var ErrConsumeEnded = errors.New("consumption ended (consumer deleted?)")

// Gone reports whether err, a consumer's info asked for, says the
// consumer is gone: deleted, or its stream with it.
func Gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// Consume hands cons's messages to handle until ctx ends, then stops
// taking them (drain: handing on those already pulled first) and returns
// once no callback can still be running. It returns ErrConsumeEnded when
// the consumption ends before ctx, the consumer deleted.
//
// A pull that no server took is answered "no responders": the consumer
// had no leader to take it, as when the processes of a fleet create it
// together on a cluster (on three members, the first pull of one of two
// such workers, at times of both, was answered so). nats.go pulls again
// only once two of the consumer's heartbeats went missing, 30 s on, and
// nothing is taken meanwhile: the pull is sent again instead, after a
// pause that grows while pulls go unanswered; the consumer is looked for
// then, and when it is gone (deleted) Consume ends.
func Consume(ctx context.Context, cons jetstream.Consumer, handle jetstream.MessageHandler, log *slog.Logger, drain bool, opts ...jetstream.PullConsumeOpt) error {
	unheard := make(chan struct{}, 1)
	onErr := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, nats.ErrNoResponders) {
			select {
			case unheard <- struct{}{}:
			default:
			}
		}
	})
	opts = append(opts, onErr)
	var pause time.Duration
	for {
		started := time.Now()
		calls := new(callbacks)
		cc, err := cons.Consume(calls.wrap(handle), opts...)
		if err != nil {
			return fmt.Errorf("consume %s: %w", cons.CachedInfo().Name, err)
		}
		select {
		case <-ctx.Done():
		case <-unheard:
		case <-cc.Closed():
			if ctx.Err() == nil {
				// nats.go ended it: the consumer was deleted (by an
				// operator, or with its stream), and only creating it
				// again takes messages again.
				calls.end()
				return fmt.Errorf("consume %s: %w", cons.CachedInfo().Name, ErrConsumeEnded)
			}
		}
		if drain && ctx.Err() != nil {
			cc.Drain()
		} else {
			cc.Stop()
		}
		<-cc.Closed()
		calls.end()
		if ctx.Err() != nil {
			return nil
		}
		if _, err := cons.Info(ctx); Gone(err) {
			// Its pulls went unheard because it is gone.
			return fmt.Errorf("consume %s: %w", cons.CachedInfo().Name, ErrConsumeEnded)
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

// callbacks counts a consumption's callbacks running. nats.go reports a
// stopped consumption closed as soon as it has unsubscribed, while the
// callback in hand may still run (a job consumer's, waiting for a handler
// slot): end waits for it.
type callbacks struct {
	mu      sync.Mutex
	ended   bool
	running sync.WaitGroup
}

func (c *callbacks) wrap(handle jetstream.MessageHandler) jetstream.MessageHandler {
	return func(msg jetstream.Msg) {
		c.mu.Lock()
		if c.ended {
			// Unsubscribed: left unacknowledged, as the messages a stop
			// drops, for a redelivery.
			c.mu.Unlock()
			return
		}
		c.running.Add(1)
		c.mu.Unlock()
		defer c.running.Done()
		handle(msg)
	}
}

// end returns once no callback runs, and none starts after.
func (c *callbacks) end() {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.running.Wait()
}

// The pause before a pull no server took is sent again: pullAgainMin,
// doubling while each new pull is answered so at once, to pullAgainMax.
const (
	pullAgainMin = 50 * time.Millisecond
	pullAgainMax = time.Second
)

// Keep runs a consumption until ctx ends, starting it again with backoff
// each time it fails (its durable consumer could not be created while a
// cluster elects a leader or a node restarts, or was deleted: Consume's
// ErrConsumeEnded): one consumer's trouble never stops the others or the
// process. The backoff grows from keepMin to keepMax while runs fail
// quickly, and starts over after a run that lasted keepSettled.
func Keep(ctx context.Context, log *slog.Logger, name string, run func(context.Context) error) {
	backoff := keepMin
	for {
		started := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("stopped on its own")
		}
		if time.Since(started) >= keepSettled {
			backoff = keepMin
		}
		log.Warn("consumer failed; starting it again", "consumer", name, "err", err, "in", backoff)
		if !wait.Sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, keepMax)
	}
}

// Keep's backoff bounds, and how long a run lasts to count as settled.
var (
	keepMin     = 250 * time.Millisecond
	keepMax     = 10 * time.Second
	keepSettled = time.Minute
)
