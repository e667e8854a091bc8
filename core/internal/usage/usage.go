// Package usage publishes one event per gateway request to the SB_USAGE
// stream, off the request path. Requests hand events to a bounded buffer; a
// publisher goroutine takes what is queued whenever it is woken, packs the
// events of each machine into batch messages (internal/usagebatch: many
// events, one stream message, so the bus's per-message work is paid once
// per batch) and retries each message until JetStream has acknowledged it.
// It never waits to fill a batch: at a low rate a message holds one event.
//
// Every event gets an id minted here, and every batch too: the message's
// JetStream message id (the event's own id for a message of one event). A
// batch is formed once and retried intact, so a retry of a message whose
// acknowledgement was lost (the stream leader died between storing and
// acknowledging, say) is dropped by the stream's de-duplication, and
// nothing a client sends can make two events share an id. An event that
// cannot be encoded is logged, counted and skipped. A batch the stream
// refuses is split into messages of one event; an event the stream refuses
// is logged, counted and skipped; the others flow on. While NATS is away
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
	"github.com/switchboardhq/switchboard/internal/usagebatch"
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
	// DefaultLinger is how long a publishing round waits for more events to
	// join the one that woke it. Nobody waits on a usage event (the answer
	// has gone), so a few milliseconds cost nothing, and they make one
	// stream message carry tens of events instead of a few: the stream's
	// work (storage, de-duplication ids, delivery to the roll-up, and the
	// goroutines each message wakes on both sides) is paid per message.
	// At a steady 1,000 chat requests a second, 25 ms instead of 5 ms took
	// the gateway's CPU per request from 420-480 to 380-410 us (cmd/bench,
	// four runs each). A crash loses what is queued, and lingering keeps
	// events queued that much longer.
	DefaultLinger = 25 * time.Millisecond
)

// Batching: the events taken from the queue in one round (in flight to
// JetStream at once), and the bounds of one batch message, in events and
// in bytes (well under the server's payload limit, see maxPayload).
const (
	maxRound      = 4096
	maxBatch      = 256
	maxBatchBytes = 64 << 10
)

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
	// Linger is how long a round waits for more events before it publishes
	// (negative: not at all). Rounds that find a full batch waiting, and the
	// drain at shutdown, do not wait.
	Linger time.Duration
	// DedupWindow is the usage stream's de-duplication window
	// (spine.JobDedupWindow). A message first sent longer ago than half of
	// it is looked for in the stream before it is sent again (see stored).
	DedupWindow time.Duration
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
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = spine.JobDedupWindow
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
}

// message is what one publish sends: one event (data is that event's
// encoding, id its id) or a batch of several (data is their UsageBatch,
// id minted for it). It is formed once and retried as is.
type message struct {
	id, subject string
	data        []byte
	compressed  bool // data is the batch compressed (usagebatch.Compress)
	events      []item
	refusals    int
	// sent is when it was first sent (zero: not yet).
	sent time.Time
}

func (m *message) batch() bool { return len(m.events) > 1 }

// Publisher sends usage events.
type Publisher struct {
	js  jetstream.JetStream
	nc  *nats.Conn
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	retry    []message // formed, to be sent again before the queue
	queue    []item    // waiting, oldest first
	waiting  int       // events in retry
	inflight int       // events taken and not resolved
	bytes    int64     // events' encodings, waiting or in flight
	stopped  bool

	wake chan struct{}
	done chan struct{}
	// the most events a message carries (benchmarks compare).
	maxBatch int

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
		maxBatch: maxBatch,
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
	full := len(p.queue)+p.waiting+p.inflight >= p.cfg.MaxEvents || p.bytes+int64(len(data)) > p.cfg.MaxBytes
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
	buffered := len(p.queue) + p.waiting + p.inflight
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
			p.linger(ctx)
			p.flush(ctx)
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Drain)
			p.flush(dctx)
			cancel()
			p.mu.Lock()
			p.stopped = true
			lost := len(p.queue) + p.waiting + p.inflight
			p.mu.Unlock()
			if lost > 0 {
				p.dropped.Add(int64(lost))
				p.log.Error("usage events not published before shutdown", "lost", lost, "drain", p.cfg.Drain)
			}
			return
		}
	}
}

// linger lets more events join the round (see DefaultLinger), unless a
// batch is already waiting or ctx ends.
func (p *Publisher) linger(ctx context.Context) {
	if p.cfg.Linger <= 0 {
		return
	}
	p.mu.Lock()
	full := len(p.queue) >= p.maxBatch
	p.mu.Unlock()
	if !full {
		wait.Sleep(ctx, p.cfg.Linger)
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
		msgs, events := p.take()
		if len(msgs) == 0 {
			return
		}
		retry := p.send(msgs)
		p.giveBack(events, retry)
		if len(retry) == 0 {
			backoff = 100 * time.Millisecond
			continue
		}
		n := 0
		for _, m := range retry {
			n += len(m.events)
		}
		p.retried.Add(int64(n))
		p.log.Warn("usage events not acknowledged, retrying", "count", n, "messages", len(retry), "in", backoff)
		if !wait.Sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// take moves the messages to send again and up to a round of queued events
// to in flight, packing those events into messages: one per machine
// (subject) while a batch has room, in the order they came. It answers the
// messages and how many events they carry.
func (p *Publisher) take() ([]message, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msgs := p.retry
	p.retry = nil
	events := p.waiting
	p.waiting = 0
	n := min(len(p.queue), max(maxRound-events, 0))
	if n > 0 {
		msgs = pack(msgs, p.queue[:n], p.maxBatch, min(maxBatchBytes, p.maxPayload()))
		p.queue = p.queue[n:]
		if len(p.queue) == 0 {
			p.queue = nil // let the backing array go
		}
		events += n
	}
	p.inflight += events
	return msgs, events
}

// pack appends to msgs the messages carrying items: the items of one
// subject go together, in order, at most maxEvents events and maxBytes of
// batch per message.
func pack(msgs []message, items []item, maxEvents int, maxBytes int64) []message {
	first := len(msgs)
	var sizes []int64        // of the batches of the new messages
	open := map[string]int{} // subject: index in msgs of its batch with room
	for _, it := range items {
		size := int64(usagebatch.Size(len(it.data)))
		if i, ok := open[it.subject]; ok {
			if m := &msgs[i]; len(m.events) < maxEvents && sizes[i-first]+size <= maxBytes {
				m.events = append(m.events, it)
				sizes[i-first] += size
				continue
			}
		}
		open[it.subject] = len(msgs)
		msgs = append(msgs, message{subject: it.subject, events: []item{it}})
		sizes = append(sizes, size)
	}
	for i := first; i < len(msgs); i++ {
		m := &msgs[i]
		if !m.batch() {
			// One event goes as itself, under its own id.
			m.id, m.data = m.events[0].id, m.events[0].data
			continue
		}
		m.id = uuid.NewString()
		m.data = make([]byte, 0, sizes[i-first])
		for _, it := range m.events {
			m.data = usagebatch.Append(m.data, it.data)
		}
		m.data, m.compressed = usagebatch.Compress(m.data)
	}
	return msgs
}

// giveBack resolves the events of a round (taken of them); retry go back
// before the queue, in order.
func (p *Publisher) giveBack(taken int, retry []message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight -= taken
	n := 0
	for _, m := range retry {
		n += len(m.events)
	}
	p.waiting += n
	p.retry = append(retry, p.retry...)
}

// resolved frees the buffer's bytes of events published or skipped for
// good.
func (p *Publisher) resolved(events []item) {
	var b int64
	for _, it := range events {
		b += int64(len(it.data))
	}
	p.mu.Lock()
	p.bytes -= b
	p.mu.Unlock()
}

// unsent answers the messages of msgs to send, and those to keep for later.
// A message first sent longer ago than half the stream's de-duplication
// window may have been stored with its acknowledgement lost (the connection
// dropped on the way back, NATS away for minutes since): sent again past
// the window, the stream would keep it twice, and its events would be
// counted twice. Such messages are looked for in the stream first (one
// look per subject): found, they are published; when the stream cannot be
// asked, they wait.
func (p *Publisher) unsent(msgs []message) (send, later []message) {
	cutoff := time.Now().Add(-p.cfg.DedupWindow / 2)
	aged := func(m message) bool { return !m.sent.IsZero() && m.sent.Before(cutoff) }
	since := map[string]time.Time{} // subject: the earliest first send of its aged messages
	for _, m := range msgs {
		if t, ok := since[m.subject]; aged(m) && (!ok || m.sent.Before(t)) {
			since[m.subject] = m.sent
		}
	}
	if len(since) == 0 {
		return msgs, nil
	}
	found := map[string]map[string]bool{}
	failed := map[string]error{}
	for subject, t := range since {
		found[subject], failed[subject] = p.stored(subject, t)
	}
	send = msgs[:0:0]
	for _, m := range msgs {
		switch {
		case !aged(m):
			send = append(send, m)
		case failed[m.subject] != nil:
			p.log.Warn("usage message not looked for in the stream, kept", "batch_id", m.id, "err", failed[m.subject])
			later = append(later, m)
		case found[m.subject][m.id]:
			p.published.Add(int64(len(m.events)))
			p.resolved(m.events)
		default:
			send = append(send, m)
		}
	}
	return send, later
}

// stored answers the message ids of the usage stream's messages on subject
// stored since a moment before since: a consumer of the subject from then
// on, headers only, read to its end.
func (p *Publisher) stored(subject string, since time.Time) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*p.cfg.AckTimeout)
	defer cancel()
	stream, err := p.js.Stream(ctx, spine.StreamUsage)
	if err != nil {
		return nil, err
	}
	from := since.Add(-time.Minute) // the server's clock may differ from ours
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject: subject, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from,
		AckPolicy: jetstream.AckNonePolicy, HeadersOnly: true, MemoryStorage: true, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), p.cfg.AckTimeout)
		defer cancel()
		_ = stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	ids := map[string]bool{}
	pending := cons.CachedInfo().NumPending
	for seen := uint64(0); seen < pending; {
		batch, err := cons.Fetch(int(min(pending-seen, 1000)), jetstream.FetchMaxWait(p.cfg.AckTimeout))
		if err != nil {
			return nil, err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			ids[msg.Headers().Get(jetstream.MsgIDHeader)] = true
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("the stream's messages could not be read to their end")
		}
		seen += uint64(n)
	}
	return ids, nil
}

// send publishes msgs and waits for their acknowledgements (each fails
// after the ack timeout), returning those to try again. A batch the stream
// refuses comes back as messages of one event each, so that only the
// event at fault is skipped.
func (p *Publisher) send(msgs []message) []message {
	msgs, retry := p.unsent(msgs)
	futures := make([]jetstream.PubAckFuture, len(msgs))
	errs := make([]error, len(msgs))
	now := time.Now()
	for i := range msgs {
		if msgs[i].sent.IsZero() {
			msgs[i].sent = now
		}
		m := msgs[i]
		msg := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, m.id)
		if m.batch() {
			usagebatch.SetHeader(msg.Header, len(m.events))
			if m.compressed {
				usagebatch.MarkCompressed(msg.Header)
			}
		}
		futures[i], errs[i] = p.js.PublishMsgAsync(msg)
	}
	for i, f := range futures {
		err := errs[i]
		if f != nil {
			select {
			case <-f.Ok():
			case err = <-f.Err():
			}
		}
		m := msgs[i]
		if err == nil {
			p.published.Add(int64(len(m.events)))
			p.resolved(m.events)
			continue
		}
		var api *jetstream.APIError
		refused := false
		switch {
		case errors.Is(err, nats.ErrMaxPayload):
			refused, m.refusals = true, p.cfg.MaxRefusals
		case errors.As(err, &api) && (api.Code == 400 || api.Code == 413):
			// The stream answered and said no to this message (not "not
			// now", as while a leader is elected: that is retried).
			refused = true
			m.refusals++
		}
		if refused && m.batch() {
			// Something in it is refused (an event too large for the
			// stream, say): its events go again one by one, at once. The
			// batch was not stored, so they cannot count twice.
			p.log.Warn("usage batch refused, its events sent one by one", "batch_id", m.id, "events", len(m.events), "err", err)
			for _, it := range m.events {
				retry = append(retry, message{id: it.id, subject: it.subject, data: it.data, events: []item{it}})
			}
			continue
		}
		if m.refusals >= p.cfg.MaxRefusals {
			n := p.refused.Add(1)
			p.resolved(m.events)
			p.log.Error("usage event refused, skipped", "event_id", m.id, "subject", m.subject, "refused", n, "err", err)
			continue
		}
		retry = append(retry, m)
	}
	return retry
}
