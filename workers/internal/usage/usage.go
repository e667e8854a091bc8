// Package usage rolls the SB_USAGE events up: a durable consumer takes them
// in batches, sums each batch per machine, UTC day, hour, provider, model,
// connection, key and endpoint, hands the sums to core (Admin.ApplyUsage)
// and acknowledges the events only once core has stored them. Core counts
// each event once, by its stream sequence, so an event redelivered after a
// worker died between core's write and the acknowledgement is not counted
// twice.
//
// A message is one event or a batch of them (internal/usagebatch). The
// events of one message that fall in one roll-up document always travel in
// one delta, under the message's sequence, so core stores them together or
// not at all and the sequence still de-duplicates them. A message is
// acknowledged once all its events are stored or dead-lettered. Events are
// dead-lettered one by one, as messages of one event, so that a bad event
// or a refusing document never takes a batch's other events with it; only
// a message whose batch framing is broken, or whose compressed payload
// cannot be read, goes to the dead-letter stream whole, with its headers.
package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
	"github.com/switchboardhq/switchboard/internal/wait"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Durable is the consumer name the workers of a fleet share.
const Durable = "usage-rollup"

// MaxAge is the age past which an event is not rolled up: its day's
// document may have left the bucket (spine.UsageRollupTTL after its last
// update). The stream keeps events for less than this anyway.
const MaxAge = spine.UsageRollupTTL - 2*24*time.Hour

// lastCallTimeout bounds the attempt made after the context ended, so that
// shutdown is not held up by a core that is gone.
const lastCallTimeout = 5 * time.Second

// Admin is the part of core's admin API the roll-up needs.
type Admin interface {
	ApplyUsage(ctx context.Context, in *corev1.ApplyUsageRequest, opts ...grpc.CallOption) (*corev1.ApplyUsageResponse, error)
}

// Config tunes the consumer; zero values take the defaults.
type Config struct {
	// Batch is the most messages rolled up in one call to core (1000); a
	// message is one event or a batch of them.
	Batch int
	// FetchBytes bounds the bytes of the messages of one call (4 MiB), as
	// stored: a batch message may be 64 KiB, and a compressed one holds
	// more events than its bytes (about 2.3 times at chat load; at most 1
	// MiB decoded). It is never below the largest message the server takes
	// (and a little), which would never be delivered.
	FetchBytes int
	// MaxWait is how long a fetch waits to fill a batch (500ms).
	MaxWait time.Duration
	// MaxAckPending bounds the messages delivered and not yet acknowledged
	// across the fleet (20000); it also bounds, in practice, the sequences a
	// roll-up document remembers for de-duplication.
	MaxAckPending int
	// CallTimeout bounds one call to core (30s).
	CallTimeout time.Duration
	// MaxDeliver is the delivery of an event whose document keeps refusing
	// it (core answers, but cannot store it) at which it goes to the
	// dead-letter stream (10). Every delivery counts, also one handed back
	// by a worker that stopped while core was away; a worker waiting for
	// core keeps its deliveries alive and does not hand them back.
	MaxDeliver int
	// Lost counts the messages SB_USAGE removed before the roll-up took
	// them (nil: not counted); see lostBefore.
	Lost prometheus.Counter
}

func (c Config) withDefaults() Config {
	if c.Batch <= 0 {
		c.Batch = 1000
	}
	if c.FetchBytes <= 0 {
		c.FetchBytes = 4 << 20
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 20_000
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 10
	}
	return c
}

// ackWait is the consumer's AckWait: a call to core may take CallTimeout,
// and its messages are renewed around it.
func (c Config) ackWait() time.Duration { return c.CallTimeout + 30*time.Second }

// Roller consumes SB_USAGE into core's roll-ups.
type Roller struct {
	js         jetstream.JetStream
	admin      Admin
	adminToken string
	cfg        Config
	log        *slog.Logger
	now        func() time.Time
}

// New returns a Roller.
func New(admin Admin, adminToken string, cfg Config, log *slog.Logger) *Roller {
	return &Roller{admin: admin, adminToken: adminToken, cfg: cfg.withDefaults(), log: log.With("consumer", Durable), now: time.Now}
}

// fetchAgainAfter is the pause after a fetch that ended early with nothing.
const fetchAgainAfter = 100 * time.Millisecond

// Run consumes until ctx ends. The part of a batch in flight then gets one
// last attempt; what is not stored is handed back for redelivery.
func (r *Roller) Run(ctx context.Context, js jetstream.JetStream) error {
	r.js = js
	cons, err := r.Consumer(ctx, js)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	fetchBytes := r.cfg.FetchBytes
	if mp := js.Conn().MaxPayload(); mp > 0 {
		fetchBytes = max(fetchBytes, int(mp)+64<<10)
	}
	backoff := time.Second
	for ctx.Err() == nil {
		// Where the consumer stood, to tell whether the stream removed
		// messages before this fetch reached them (lostBefore).
		before, err := cons.Info(ctx)
		if spine.Gone(err) {
			// Deleted (an operator's, or its stream made again): fetches
			// from it would go unanswered for ever; made again by the
			// caller.
			return fmt.Errorf("usage roll-up: %w", spine.ErrConsumeEnded)
		}
		if err != nil {
			before = nil
		}
		batch, err := cons.Fetch(r.cfg.Batch, jetstream.FetchMaxWait(r.cfg.MaxWait), jetstream.FetchMaxBytes(fetchBytes))
		if err != nil {
			r.log.Warn("usage fetch failed", "err", err, "retry_in", backoff)
			if !wait.Sleep(ctx, backoff) {
				break
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if err := batch.Error(); err != nil && ctx.Err() == nil {
			r.log.Debug("usage fetch ended early", "err", err, "messages", len(msgs))
			// A fetch no server took (the consumer has no leader yet, as
			// while a cluster starts) ends at once: asked again without a
			// pause, it spins.
			if len(msgs) == 0 && !wait.Sleep(ctx, fetchAgainAfter) {
				break
			}
		}
		if n, from := lostBefore(before, msgs); n > 0 {
			r.log.Error("usage events lost: the usage stream removed messages before they were rolled up (its age or size bound, SWITCHBOARD_USAGE_MAX_BYTES, ran past the roll-up)",
				"messages", n, "first_sequence", from, "last_sequence", from+n-1)
			if r.cfg.Lost != nil {
				r.cfg.Lost.Add(float64(n))
			}
		}
		if len(msgs) > 0 {
			r.Process(ctx, cons, msgs)
		}
	}
	return nil
}

// NewLostCounter registers the counter of usage messages lost before the
// roll-up (Config.Lost) with reg.
func NewLostCounter(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Name: "usage_messages_lost_total",
		Help: "Usage stream messages (each one event or a batch) removed by the stream's age or size bound before the roll-up took them.",
	})
	telemetry.Registerer(reg).MustRegister(c)
	return c
}

// lostBefore is how many messages the stream removed (its age or size
// bound) before the roll-up took them, and the sequence of the first: the
// stream sequences between the last one the consumer had delivered before
// this fetch and the first message of the fetch, when that message is a
// first delivery and the next the consumer delivered at all (no other
// worker took one in between: then nothing can be told). The consumer's
// filter is the stream's whole subject space, so a sequence it skipped is
// one the stream no longer held.
func lostBefore(before *jetstream.ConsumerInfo, msgs []jetstream.Msg) (n, from uint64) {
	if before == nil || before.Delivered.Consumer == 0 || len(msgs) == 0 {
		return 0, 0 // nothing delivered yet: no baseline
	}
	md, err := msgs[0].Metadata()
	if err != nil || md.NumDelivered != 1 || md.Sequence.Consumer != before.Delivered.Consumer+1 {
		return 0, 0
	}
	if md.Sequence.Stream <= before.Delivered.Stream+1 {
		return 0, 0
	}
	return md.Sequence.Stream - before.Delivered.Stream - 1, before.Delivered.Stream + 1
}

// Consumer creates (or updates) the fleet's durable consumer of SB_USAGE.
func (r *Roller) Consumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, spine.StreamUsage, jetstream.ConsumerConfig{
		Durable:       Durable,
		Description:   "usage roll-ups",
		FilterSubject: spine.SubjectUsage + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.ackWait(),
		// No bound of the server's: one would end a message's deliveries
		// unread, its events never rolled up, after as many hand-backs (a
		// worker stopped while core was away, a dead-letter copy that
		// failed). An event core cannot store goes to the dead-letter
		// stream at its MaxDeliver-th delivery (Process), an undecodable
		// one at once.
		MaxDeliver:    -1,
		MaxAckPending: r.cfg.MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", Durable, err)
	}
	return cons, nil
}

// chunkEvents is about the most events a roll-up holds decoded at once: a
// fetched batch (up to Config.Batch messages of up to 256 events each at
// chat load) is decoded, stored and acknowledged a part of at least this
// many events at a time (a message's events stay together), so its
// decoded events, each a few hundred bytes of protobuf, never sit in memory
// all together beside the gateway's traffic.
const chunkEvents = 1024

// Process rolls up one batch, stores it through core and acknowledges it,
// a part of about chunkEvents events at a time; events that could not be
// stored before ctx ended are handed back, as are the parts after the one
// in flight when it ended. A message with events their
// document refused is handed back with a delay; at its MaxDeliver-th
// delivery those events go to the dead-letter stream, as do undecodable
// ones: one machine's trouble never holds up another's events, nor one
// event its batch's others.
func (r *Roller) Process(ctx context.Context, cons jetstream.Consumer, msgs []jetstream.Msg) {
	var (
		floor     uint64
		floorRead bool
		events    []Event
		keep      []jetstream.Msg
		bad       = map[uint64][]deadEvent{} // by message sequence: events that cannot be rolled up
		// The batch's deliveries were last renewed at beaten; they pass
		// the consumer's ackWait after it.
		beaten  = time.Now()
		ackWait = r.cfg.ackWait()
	)
	// beat renews the deliveries of the part gathered so far and of rest.
	beat := func(rest []jetstream.Msg) {
		inProgress(keep)
		inProgress(rest)
		beaten = time.Now()
	}
	// store stores and settles the part gathered so far; rest are the
	// batch's messages after it.
	store := func(rest []jetstream.Msg) bool {
		if !floorRead {
			floorRead = true
			if info, err := cons.Info(ctx); err == nil {
				floor = info.AckFloor.Stream
				if info.Config.AckWait > 0 {
					ackWait = info.Config.AckWait
				}
			}
		} else if time.Since(beaten) >= ackWait/4 {
			// The parts before took a while: the deliveries still held are
			// renewed before this part's call to core, which may take up to
			// CallTimeout, so none passes its AckWait and goes to another
			// worker meanwhile.
			beat(rest)
		}
		if !r.storeChunk(ctx, floor, keep, events, bad, rest, func() { beat(rest) }) {
			for _, m := range rest {
				_ = m.Nak()
			}
			return false
		}
		events, keep = nil, nil
		clear(bad)
		return true
	}
	for i, m := range msgs {
		evs, dead, err := r.decode(m)
		if err != nil {
			r.deadLetter(ctx, m, strings.TrimPrefix(m.Subject(), spine.SubjectUsage+"."), err.Error())
			continue
		}
		if len(dead) > 0 {
			bad[seqOf(m)] = dead
		}
		if len(evs) == 0 {
			r.settle(ctx, m, dead)
			continue
		}
		keep = append(keep, m)
		events = append(events, evs...)
		if len(events) < chunkEvents {
			continue
		}
		if !store(msgs[i+1:]) {
			return
		}
		if ctx.Err() != nil {
			// Stopping: the part in flight had its last attempt; the
			// parts after it are handed back rather than each given one.
			for _, m := range msgs[i+1:] {
				_ = m.Nak()
			}
			return
		}
	}
	if len(events) > 0 {
		store(nil)
	}
}

// storeChunk stores the events of the messages keep through core and
// settles those messages (beat keeps them and rest, the batch's messages
// still to come, alive meanwhile); false when the events could not be
// stored before ctx ended: keep is handed back for redelivery.
func (r *Roller) storeChunk(ctx context.Context, floor uint64, keep []jetstream.Msg, events []Event, bad map[uint64][]deadEvent,
	rest []jetstream.Msg, beat func()) bool {
	failed, err := r.Store(ctx, floor, events, beat)
	if err != nil {
		r.log.Warn("usage batch handed back for redelivery", "messages", len(keep)+len(rest), "events", len(events), "err", err)
		for _, m := range keep {
			_ = m.Nak()
		}
		return false
	}
	refused := make(map[uint64][]Event, len(failed))
	for _, e := range failed {
		refused[e.Seq] = append(refused[e.Seq], e)
	}
	// A lost acknowledgement only means a redelivery, which core ignores.
	for _, m := range keep {
		seq := seqOf(m)
		dead := bad[seq]
		if ref := refused[seq]; len(ref) > 0 {
			attempt := uint64(1)
			if md, err := m.Metadata(); err == nil {
				attempt = md.NumDelivered
			}
			if attempt < uint64(r.cfg.MaxDeliver) {
				// Its other events are stored: core ignores them when
				// they come again.
				_ = m.NakWithDelay(time.Duration(1<<min(attempt, 5)) * time.Second)
				continue
			}
			for _, e := range ref {
				dead = append(dead, deadEvent{index: e.Index, machine: e.Usage.GetMachineId(), data: e.data, reason: "its roll-up document refused it"})
			}
		}
		if len(dead) == 0 {
			_ = m.Ack()
			continue
		}
		r.settle(ctx, m, dead)
	}
	return true
}

// deadEvent is an event of a message that cannot be rolled up.
type deadEvent struct {
	index           int
	machine, reason string
	data            []byte
}

// settle ends the deliveries of m, whose other events are stored, once its
// dead events are in the dead-letter stream. A message of one event goes
// there as it is; the events of a batch go one message each.
func (r *Roller) settle(ctx context.Context, m jetstream.Msg, dead []deadEvent) {
	if !usagebatch.IsBatch(m.Headers()) {
		r.deadLetter(ctx, m, dead[0].machine, dead[0].reason)
		return
	}
	for _, d := range dead {
		if err := r.publishDead(ctx, m, d.machine, d.reason, d.data, d.index); err != nil {
			r.log.Warn("dead-lettering a usage event failed, will retry", "subject", m.Subject(), "err", err)
			_ = m.NakWithDelay(5 * time.Second)
			return
		}
		r.log.Error("usage event dead-lettered", "subject", m.Subject(), "machine", d.machine, "index", d.index, "reason", d.reason)
	}
	// Every event is stored or dead-lettered.
	_ = m.Ack()
}

// deadLetter copies m to the dead-letter stream whole, then ends its
// deliveries; when the copy fails it is handed back to be tried again.
func (r *Roller) deadLetter(ctx context.Context, m jetstream.Msg, machine, reason string) {
	if r.js == nil {
		_ = m.Nak()
		return
	}
	if err := r.publishDead(ctx, m, machine, reason, m.Data(), -1); err != nil {
		r.log.Warn("dead-lettering a usage event failed, will retry", "subject", m.Subject(), "err", err)
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	r.log.Error("usage event dead-lettered", "subject", m.Subject(), "machine", machine, "reason", reason)
	_ = m.Term()
}

// publishDead stores data, from m, in the dead-letter stream: m's whole
// payload (index -1, a batch keeping its header) or the event at index of
// m's batch, as a message of one event. Its message id, from m's sequence
// (and the index), makes a second copy a no-op.
func (r *Roller) publishDead(ctx context.Context, m jetstream.Msg, machine, reason string, data []byte, index int) error {
	if r.js == nil {
		return errors.New("no stream")
	}
	if !validMachineID(machine) {
		machine = strings.TrimPrefix(m.Subject(), spine.SubjectUsage+".")
		if !validMachineID(machine) {
			machine = "unknown"
		}
	}
	msg := &nats.Msg{Subject: spine.SubjectUsageDead + "." + machine, Data: data, Header: nats.Header{}}
	msg.Header.Set("Sb-Original-Subject", m.Subject())
	msg.Header.Set("Sb-Reason", reason)
	if index < 0 && usagebatch.IsBatch(m.Headers()) {
		msg.Header.Set(contract.HeaderUsageEvents, m.Headers().Get(contract.HeaderUsageEvents))
		if enc := m.Headers().Get(contract.HeaderUsageEncoding); enc != "" {
			msg.Header.Set(contract.HeaderUsageEncoding, enc)
		}
	}
	if md, err := m.Metadata(); err == nil {
		seq := strconv.FormatUint(md.Sequence.Stream, 10)
		msg.Header.Set("Sb-Original-Sequence", seq)
		id := "dead-" + seq
		if index >= 0 {
			msg.Header.Set("Sb-Original-Index", strconv.Itoa(index))
			id += "." + strconv.Itoa(index)
		}
		msg.Header.Set(jetstream.MsgIDHeader, id)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := r.js.PublishMsg(pctx, msg)
	return err
}

// seqOf is m's stream sequence (0 without metadata: decode refuses those).
func seqOf(m jetstream.Msg) uint64 {
	if md, err := m.Metadata(); err == nil {
		return md.Sequence.Stream
	}
	return 0
}

// decode reads m's events. An error is about the message as a whole (no
// metadata, a single event that cannot be rolled up, a broken batch); the
// events of a batch that cannot be rolled up come back as dead, the
// others as events.
func (r *Roller) decode(m jetstream.Msg) ([]Event, []deadEvent, error) {
	md, err := m.Metadata()
	if err != nil {
		return nil, nil, fmt.Errorf("no metadata: %w", err)
	}
	parts, err := usagebatch.Split(m.Headers(), m.Data())
	if err != nil {
		return nil, nil, err
	}
	if !usagebatch.IsBatch(m.Headers()) {
		e, err := r.decodeEvent(md, parts[0], 0)
		if err != nil {
			return nil, nil, err
		}
		return []Event{e}, nil, nil
	}
	events := make([]Event, 0, len(parts))
	var dead []deadEvent
	for i, p := range parts {
		e, err := r.decodeEvent(md, p, i)
		if err != nil {
			dead = append(dead, deadEvent{index: i, machine: e.Usage.GetMachineId(), data: p, reason: err.Error()})
			continue
		}
		events = append(events, e)
	}
	return events, dead, nil
}

// decodeEvent decodes the event at index of a message; on error the event
// is what could be decoded.
func (r *Roller) decodeEvent(md *jetstream.MsgMetadata, data []byte, index int) (Event, error) {
	ev := &busv1.UsageEvent{}
	e := Event{Seq: md.Sequence.Stream, Index: index, Usage: ev, data: data}
	if err := proto.Unmarshal(data, ev); err != nil {
		return e, fmt.Errorf("undecodable: %w", err)
	}
	if !validMachineID(ev.GetMachineId()) {
		return e, fmt.Errorf("invalid machine id %q", ev.GetMachineId())
	}
	t := md.Timestamp
	if ev.GetTime().IsValid() && ev.GetTime().GetSeconds() > 0 {
		t = ev.GetTime().AsTime()
	}
	if r.now().Sub(t) > MaxAge {
		return e, fmt.Errorf("event of %s is older than %s", t.UTC().Format(time.RFC3339), MaxAge)
	}
	e.Time = t
	return e, nil
}

// Store hands the roll-up of events to core, retrying with backoff while ctx
// lasts (beat is called before each retry, to keep the events' deliveries
// alive). Deltas core reports as split are sent again one message's events
// each. The
// events of deltas core could not store (their document refused them) are
// returned; the others are stored.
func (r *Roller) Store(ctx context.Context, ackFloor uint64, events []Event, beat func()) ([]Event, error) {
	groups := Build(events)
	var failed []Event
	for len(groups) > 0 {
		req := &corev1.ApplyUsageRequest{AckFloor: ackFloor, Deltas: make([]*corev1.UsageDelta, len(groups))}
		for i, g := range groups {
			req.Deltas[i] = g.Delta
		}
		resp, err := r.apply(ctx, req, beat)
		if contract.Refused(err) {
			// Core refused the call itself: find the deltas it refuses by
			// sending them one at a time.
			if len(groups) == 1 {
				r.log.Error("usage delta refused by core", "machine", groups[0].Delta.GetMachineId(), "events", len(groups[0].Events), "err", err)
				return append(failed, groups[0].Events...), nil
			}
			for _, g := range groups {
				f, err := r.Store(ctx, ackFloor, g.Events, beat)
				if err != nil {
					return nil, err
				}
				failed = append(failed, f...)
			}
			return failed, nil
		}
		if err != nil {
			return nil, err
		}
		for _, i := range resp.GetFailed() {
			if int(i) >= 0 && int(i) < len(groups) {
				failed = append(failed, groups[i].Events...)
			}
		}
		var again []Group
		for _, i := range resp.GetSplit() {
			if int(i) < 0 || int(i) >= len(groups) {
				continue
			}
			g := groups[i]
			if len(g.Delta.GetSequences()) == 1 {
				// Cannot happen: one message's events are either applied or
				// not.
				r.log.Error("single-message usage delta reported split", "machine", g.Delta.GetMachineId(), "sequence", g.Events[0].Seq)
				continue
			}
			again = append(again, Split(g)...)
		}
		if len(again) > 0 {
			r.log.Info("usage deltas mixing applied and new events, sent again per message", "deltas", len(again))
		}
		groups = again
	}
	return failed, nil
}

// apply calls core until it answers, or ctx ends. After ctx ends one last
// attempt is made, so that a batch in flight at shutdown is not wasted.
func (r *Roller) apply(ctx context.Context, req *corev1.ApplyUsageRequest, beat func()) (*corev1.ApplyUsageResponse, error) {
	backoff := 500 * time.Millisecond
	for {
		last := ctx.Err() != nil
		timeout := r.cfg.CallTimeout
		if last {
			timeout = min(timeout, lastCallTimeout)
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		cctx = metadata.AppendToOutgoingContext(cctx, "authorization", "Bearer "+r.adminToken)
		resp, err := r.admin.ApplyUsage(cctx, req)
		cancel()
		if err == nil {
			return resp, nil
		}
		if last || contract.Refused(err) {
			return nil, err
		}
		r.log.Warn("storing usage failed, will retry", "deltas", len(req.GetDeltas()), "retry_in", backoff, "err", err)
		wait.Sleep(ctx, backoff)
		backoff = min(2*backoff, 15*time.Second)
		if beat != nil {
			beat()
		}
	}
}

// inProgress resets the acknowledgement timers of msgs.
func inProgress(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// validMachineID reports whether s is 16 lowercase hex characters.
func validMachineID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
