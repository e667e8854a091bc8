// Package usage publishes one event per gateway request to the SB_USAGE
// stream, off the request path. Requests hand events to a bounded buffer; a
// publisher goroutine sends them in batches and retries each one until
// JetStream has acknowledged it.
//
// Every event gets an id minted here, its JetStream message id: a retry of
// an event whose acknowledgement was lost (the stream leader died between
// storing and acknowledging, say) is dropped by the stream's
// de-duplication, and nothing a client sends can make two events share an
// id. An event that cannot be encoded, or that the stream refuses, is
// logged, counted and skipped; the others flow on. While NATS is away
// (a cluster electing a leader, a node restarting) events wait in the
// buffer, bounded in events and bytes; past the bound new events are
// dropped, counted and logged.
package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/wait"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Defaults of Config.
const (
	// DefaultMaxEvents bounds the events waiting to be published: at a
	// thousand requests a second, over a minute and a half of outage.
	DefaultMaxEvents = 100_000
	// DefaultMaxBytes bounds their encoded size (events are ~200 bytes).
	DefaultMaxBytes = 64 << 20
	// DefaultAckTimeout is how long a publish waits for its acknowledgement
	// before it is sent again.
	DefaultAckTimeout = 5 * time.Second
	// DefaultDrain bounds the publishing of what is buffered once Run's
	// context ends.
	DefaultDrain = 10 * time.Second
	// DefaultMaxRefusals is how many times the stream may refuse an event
	// before it is skipped.
	DefaultMaxRefusals = 5
)

// batch is how many events are in flight to JetStream at once.
const batch = 512

// maxBackoff caps the wait between two rounds of retries.
const maxBackoff = 5 * time.Second

// Config tunes the publisher; zero values take the defaults.
type Config struct {
	// MaxEvents and MaxBytes bound the buffer.
	MaxEvents int
	MaxBytes  int64
	// AckTimeout bounds the wait for one publish's acknowledgement.
	AckTimeout time.Duration
	// Drain bounds the last publishing once Run's context ends.
	Drain time.Duration
	// MaxRefusals bounds the refusals of one event by the stream.
	MaxRefusals int
}

func (c Config) withDefaults() Config {
	if c.MaxEvents <= 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.Drain <= 0 {
		c.Drain = DefaultDrain
	}
	if c.MaxRefusals <= 0 {
		c.MaxRefusals = DefaultMaxRefusals
	}
	return c
}

// Stats are the publisher's counters since it started.
type Stats struct {
	// Buffered events wait to be published (in flight included).
	Buffered int
	// Published events were acknowledged by the stream.
	Published int64
	// Dropped events found the buffer full, or came after the publisher
	// stopped.
	Dropped int64
	// Refused events could not be encoded or were refused by the stream.
	Refused int64
	// Retried counts publishes sent again (no acknowledgement in time, NATS
	// away, a refusal not yet final).
	Retried int64
}

// item is one encoded event.
type item struct {
	id, subject string
	data        []byte
	refusals    int
}

// Publisher sends usage events.
type Publisher struct {
	js  jetstream.JetStream
	nc  *nats.Conn
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	queue    []item // waiting, oldest first
	inflight int    // taken from queue and not resolved
	bytes    int64  // of queue and in flight
	stopped  bool

	wake chan struct{}
	done chan struct{}

	published, dropped, refused, retried atomic.Int64
}

// NewPublisher returns a Publisher on js's connection; Run must be running
// for events to leave.
func NewPublisher(js jetstream.JetStream, cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg = cfg.withDefaults()
	nc := js.Conn()
	// A publisher of its own, so that a publish whose acknowledgement never
	// comes fails after AckTimeout instead of waiting for ever.
	own, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(cfg.AckTimeout))
	if err != nil {
		return nil, fmt.Errorf("usage: jetstream: %w", err)
	}
	return &Publisher{
		js: own, nc: nc, cfg: cfg, log: log.With("component", "usage-publisher"),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}, nil
}

// Record queues an event, minting its id. It never waits: when the buffer
// is full the event is dropped and counted.
func (p *Publisher) Record(ev *busv1.UsageEvent) {
	if ev.GetEventId() == "" {
		ev.EventId = uuid.NewString()
	}
	data, err := proto.Marshal(ev)
	if err == nil && int64(len(data)) > p.maxPayload() {
		err = fmt.Errorf("%d bytes, over the server's payload limit", len(data))
	}
	if err != nil {
		n := p.refused.Add(1)
		p.log.Error("usage event not encodable, skipped", "event_id", ev.GetEventId(), "machine", ev.GetMachineId(), "refused", n, "err", err)
		return
	}
	it := item{id: ev.GetEventId(), subject: spine.SubjectUsage + "." + ev.GetMachineId(), data: data}
	p.mu.Lock()
	full := len(p.queue)+p.inflight >= p.cfg.MaxEvents || p.bytes+int64(len(data)) > p.cfg.MaxBytes
	stopped := p.stopped
	if !full && !stopped {
		p.queue = append(p.queue, it)
		p.bytes += int64(len(data))
	}
	p.mu.Unlock()
	if full || stopped {
		n := p.dropped.Add(1)
		if n == 1 || n%1000 == 0 {
			reason := "usage buffer full (NATS away for long?), events dropped"
			if stopped {
				reason = "usage publisher stopped, events dropped"
			}
			p.log.Error(reason, "dropped", n, "max_events", p.cfg.MaxEvents, "max_bytes", p.cfg.MaxBytes)
		}
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// maxPayload is the largest message the server takes, with room for the
// headers.
func (p *Publisher) maxPayload() int64 {
	if mp := p.nc.MaxPayload(); mp > 0 {
		return mp - 1024
	}
	return 1<<20 - 1024
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	buffered := len(p.queue) + p.inflight
	p.mu.Unlock()
	return Stats{
		Buffered: buffered, Published: p.published.Load(), Dropped: p.dropped.Load(),
		Refused: p.refused.Load(), Retried: p.retried.Load(),
	}
}

// Done is closed when Run has returned: everything buffered was published
// or the drain timed out.
func (p *Publisher) Done() <-chan struct{} { return p.done }

// Run publishes until ctx ends, then publishes what is still buffered,
// events recorded meanwhile included, for at most the drain timeout, and
// only then returns. Events recorded after that are dropped and counted.
func (p *Publisher) Run(ctx context.Context) {
	defer close(p.done)
	for {
		select {
		case <-p.wake:
			p.flush(ctx)
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Drain)
			p.flush(dctx)
			cancel()
			p.mu.Lock()
			p.stopped = true
			lost := len(p.queue) + p.inflight
			p.mu.Unlock()
			if lost > 0 {
				p.dropped.Add(int64(lost))
				p.log.Error("usage events not published before shutdown", "lost", lost, "drain", p.cfg.Drain)
			}
			return
		}
	}
}

// flush publishes until the buffer is empty or ctx ends, backing off while
// publishes fail.
func (p *Publisher) flush(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if !p.nc.IsConnected() {
			// Publishing now would only fill the client's reconnect buffer.
			if !wait.Sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		items := p.take()
		if len(items) == 0 {
			return
		}
		retry := p.send(items)
		p.giveBack(items, retry)
		if len(retry) == 0 {
			backoff = 100 * time.Millisecond
			continue
		}
		p.retried.Add(int64(len(retry)))
		p.log.Warn("usage events not acknowledged, retrying", "count", len(retry), "in", backoff)
		if !wait.Sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// take moves up to a batch of events from the queue to in flight.
func (p *Publisher) take() []item {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(p.queue), batch)
	items := make([]item, n)
	copy(items, p.queue[:n])
	p.queue = p.queue[n:]
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	p.inflight += n
	return items
}

// giveBack resolves the events taken; retry go back to the queue's head,
// in order.
func (p *Publisher) giveBack(taken, retry []item) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight -= len(taken)
	for _, it := range taken {
		p.bytes -= int64(len(it.data))
	}
	for _, it := range retry {
		p.bytes += int64(len(it.data))
	}
	p.queue = append(retry, p.queue...)
}

// send publishes items and waits for their acknowledgements (each fails
// after the ack timeout), returning those to try again.
func (p *Publisher) send(items []item) []item {
	futures := make([]jetstream.PubAckFuture, len(items))
	errs := make([]error, len(items))
	for i, it := range items {
		msg := &nats.Msg{Subject: it.subject, Data: it.data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, it.id)
		futures[i], errs[i] = p.js.PublishMsgAsync(msg)
	}
	var retry []item
	for i, f := range futures {
		err := errs[i]
		if f != nil {
			select {
			case <-f.Ok():
			case err = <-f.Err():
			}
		}
		if err == nil {
			p.published.Add(1)
			continue
		}
		it := items[i]
		var api *jetstream.APIError
		switch {
		case errors.Is(err, nats.ErrMaxPayload):
			it.refusals = p.cfg.MaxRefusals
		case errors.As(err, &api) && (api.Code == 400 || api.Code == 413):
			// The stream answered and said no to this message (not "not
			// now", as while a leader is elected: that is retried).
			it.refusals++
		}
		if it.refusals >= p.cfg.MaxRefusals {
			n := p.refused.Add(1)
			p.log.Error("usage event refused, skipped", "event_id", it.id, "subject", it.subject, "refused", n, "err", err)
			continue
		}
		retry = append(retry, it)
	}
	return retry
}
