// Package usage publishes one event per gateway request to the SB_USAGE
// stream, off the request path: requests hand events to a buffer and a
// publisher goroutine sends them in batches, retrying until JetStream has
// acknowledged each one.
package usage

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Buffer is how many events may wait for the publisher.
const Buffer = 1 << 16

// batch is how many events are in flight to JetStream at once.
const batch = 512

// Publisher sends usage events.
type Publisher struct {
	js      jetstream.JetStream
	log     *slog.Logger
	events  chan *busv1.UsageEvent
	dropped atomic.Int64
}

// NewPublisher returns a Publisher; Run must be running for events to leave.
func NewPublisher(js jetstream.JetStream, log *slog.Logger) *Publisher {
	return &Publisher{js: js, log: log, events: make(chan *busv1.UsageEvent, Buffer)}
}

// Record queues an event. It does not wait on the bus; only when the buffer
// is full (the bus is down for long) does it wait, briefly, before counting
// the event as dropped.
func (p *Publisher) Record(ev *busv1.UsageEvent) {
	select {
	case p.events <- ev:
		return
	default:
	}
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case p.events <- ev:
	case <-t.C:
		if n := p.dropped.Add(1); n == 1 || n%1000 == 0 {
			p.log.Error("usage buffer full, events dropped", "dropped", n)
		}
	}
}

// Dropped counts events that never reached the buffer.
func (p *Publisher) Dropped() int64 { return p.dropped.Load() }

// Run publishes until ctx ends, then drains the buffer (bounded by drain).
func (p *Publisher) Run(ctx context.Context, drain time.Duration) {
	var leftover []*busv1.UsageEvent
	for {
		select {
		case ev := <-p.events:
			leftover = p.send(ctx, p.fill([]*busv1.UsageEvent{ev}))
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
			defer cancel()
			for {
				pending := p.fill(leftover)
				if len(pending) == 0 {
					return
				}
				leftover = p.send(dctx, pending)
				if dctx.Err() != nil {
					p.log.Error("usage events not published before shutdown", "lost", len(leftover)+len(p.events))
					return
				}
			}
		}
	}
}

// fill takes what is buffered, up to a batch.
func (p *Publisher) fill(b []*busv1.UsageEvent) []*busv1.UsageEvent {
	for len(b) < batch {
		select {
		case ev := <-p.events:
			b = append(b, ev)
		default:
			return b
		}
	}
	return b
}

// send publishes a batch asynchronously and retries what was not
// acknowledged until ctx ends, returning what is still unsent then. The
// request id is the message id, so a retry of an event that did land is
// dropped by the stream's de-duplication.
func (p *Publisher) send(ctx context.Context, evs []*busv1.UsageEvent) []*busv1.UsageEvent {
	backoff := 100 * time.Millisecond
	for len(evs) > 0 {
		futures := make([]jetstream.PubAckFuture, len(evs))
		for i, ev := range evs {
			data, err := proto.Marshal(ev)
			if err != nil {
				p.log.Error("usage event not encodable", "err", err)
				continue
			}
			f, err := p.js.PublishAsync(spine.SubjectUsage+"."+ev.GetMachineId(), data, jetstream.WithMsgID(ev.GetRequestId()))
			if err == nil {
				futures[i] = f
			}
		}
		var retry []*busv1.UsageEvent
		for i, f := range futures {
			if f == nil {
				retry = append(retry, evs[i])
				continue
			}
			select {
			case <-f.Ok():
			case <-f.Err():
				retry = append(retry, evs[i])
			case <-ctx.Done():
				retry = append(retry, evs[i])
			}
		}
		if len(retry) == 0 || ctx.Err() != nil {
			return retry
		}
		p.log.Warn("usage events not acknowledged, retrying", "count", len(retry), "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return retry
		}
		backoff = min(2*backoff, 5*time.Second)
		evs = retry
	}
	return nil
}
