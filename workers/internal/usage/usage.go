// Package usage rolls the SB_USAGE events up: a durable consumer takes them
// in batches, sums each batch per machine, UTC day, hour, provider, model,
// connection, key and endpoint, hands the sums to core (Admin.ApplyUsage)
// and acknowledges the events only once core has stored them. Core counts
// each event once, by its stream sequence, so an event redelivered after a
// worker died between core's write and the acknowledgement is not counted
// twice.
package usage

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/wait"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
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
	// Batch is the most events rolled up in one call to core (1000).
	Batch int
	// MaxWait is how long a fetch waits to fill a batch (500ms).
	MaxWait time.Duration
	// MaxAckPending bounds the events delivered and not yet acknowledged
	// across the fleet (20000); it also bounds, in practice, the sequences a
	// roll-up document remembers for de-duplication.
	MaxAckPending int
	// CallTimeout bounds one call to core (30s).
	CallTimeout time.Duration
	// MaxDeliver is the delivery of an event whose document keeps refusing
	// it (core answers, but cannot store it) at which it goes to the
	// dead-letter stream (10). Failures to reach core do not count.
	MaxDeliver int
}

func (c Config) withDefaults() Config {
	if c.Batch <= 0 {
		c.Batch = 1000
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

// Run consumes until ctx ends. The batch in flight then gets one last
// attempt; what is not stored is handed back for redelivery.
func (r *Roller) Run(ctx context.Context, js jetstream.JetStream) error {
	r.js = js
	cons, err := r.Consumer(ctx, js)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	backoff := time.Second
	for ctx.Err() == nil {
		batch, err := cons.Fetch(r.cfg.Batch, jetstream.FetchMaxWait(r.cfg.MaxWait))
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
			r.log.Debug("usage fetch ended early", "err", err, "events", len(msgs))
		}
		if len(msgs) > 0 {
			r.Process(ctx, cons, msgs)
		}
	}
	return nil
}

// Consumer creates (or updates) the fleet's durable consumer of SB_USAGE.
func (r *Roller) Consumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, spine.StreamUsage, jetstream.ConsumerConfig{
		Durable:       Durable,
		Description:   "usage roll-ups",
		FilterSubject: spine.SubjectUsage + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.CallTimeout + 30*time.Second,
		// An event core cannot store goes to the dead-letter stream at its
		// MaxDeliver-th delivery; the server's bound, a little higher, only
		// keeps a poison event from circling for ever should that fail.
		MaxDeliver:    r.cfg.MaxDeliver + 2,
		MaxAckPending: r.cfg.MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", Durable, err)
	}
	return cons, nil
}

// Process rolls up one batch, stores it through core and acknowledges it;
// events that could not be stored before ctx ended are handed back. Events
// whose document refused them are handed back with a delay, and go to the
// dead-letter stream at their MaxDeliver-th delivery, as do undecodable
// ones: one machine's trouble never holds up another's events.
func (r *Roller) Process(ctx context.Context, cons jetstream.Consumer, msgs []jetstream.Msg) {
	events := make([]Event, 0, len(msgs))
	keep := msgs[:0:0]
	bySeq := make(map[uint64]jetstream.Msg, len(msgs))
	for _, m := range msgs {
		e, err := r.decode(m)
		if err != nil {
			r.deadLetter(ctx, m, strings.TrimPrefix(m.Subject(), spine.SubjectUsage+"."), err.Error())
			continue
		}
		keep = append(keep, m)
		events = append(events, e)
		bySeq[e.Seq] = m
	}
	if len(events) == 0 {
		return
	}
	var floor uint64
	if info, err := cons.Info(ctx); err == nil {
		floor = info.AckFloor.Stream
	}
	failed, err := r.Store(ctx, floor, events, func() { inProgress(keep) })
	if err != nil {
		r.log.Warn("usage batch handed back for redelivery", "events", len(keep), "err", err)
		for _, m := range keep {
			_ = m.Nak()
		}
		return
	}
	refused := make(map[uint64]bool, len(failed))
	for _, e := range failed {
		refused[e.Seq] = true
		m := bySeq[e.Seq]
		attempt := uint64(1)
		if md, err := m.Metadata(); err == nil {
			attempt = md.NumDelivered
		}
		if attempt >= uint64(r.cfg.MaxDeliver) {
			r.deadLetter(ctx, m, e.Usage.GetMachineId(), "its roll-up document refused it")
			continue
		}
		_ = m.NakWithDelay(time.Duration(1<<min(attempt, 5)) * time.Second)
	}
	// A lost acknowledgement only means a redelivery, which core ignores.
	// events[i] was decoded from keep[i]: its Seq is that message's stream
	// sequence.
	for i, m := range keep {
		if refused[events[i].Seq] {
			continue
		}
		_ = m.Ack()
	}
}

// deadLetter copies m to the dead-letter stream, then ends its deliveries;
// when the copy fails it is handed back to be tried again.
func (r *Roller) deadLetter(ctx context.Context, m jetstream.Msg, machine, reason string) {
	if !validMachineID(machine) {
		machine = "unknown"
	}
	msg := &nats.Msg{Subject: spine.SubjectUsageDead + "." + machine, Data: m.Data(), Header: nats.Header{}}
	msg.Header.Set("Sb-Original-Subject", m.Subject())
	msg.Header.Set("Sb-Reason", reason)
	if md, err := m.Metadata(); err == nil {
		seq := strconv.FormatUint(md.Sequence.Stream, 10)
		msg.Header.Set("Sb-Original-Sequence", seq)
		msg.Header.Set(jetstream.MsgIDHeader, "dead-"+seq)
	}
	if r.js == nil {
		_ = m.Nak()
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := r.js.PublishMsg(pctx, msg); err != nil {
		r.log.Warn("dead-lettering a usage event failed, will retry", "subject", m.Subject(), "err", err)
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	r.log.Error("usage event dead-lettered", "subject", m.Subject(), "machine", machine, "reason", reason)
	_ = m.Term()
}

func (r *Roller) decode(m jetstream.Msg) (Event, error) {
	md, err := m.Metadata()
	if err != nil {
		return Event{}, fmt.Errorf("no metadata: %w", err)
	}
	ev := &busv1.UsageEvent{}
	if err := proto.Unmarshal(m.Data(), ev); err != nil {
		return Event{}, fmt.Errorf("undecodable: %w", err)
	}
	if !validMachineID(ev.GetMachineId()) {
		return Event{}, fmt.Errorf("invalid machine id %q", ev.GetMachineId())
	}
	t := md.Timestamp
	if ev.GetTime().IsValid() && ev.GetTime().GetSeconds() > 0 {
		t = ev.GetTime().AsTime()
	}
	if r.now().Sub(t) > MaxAge {
		return Event{}, fmt.Errorf("event of %s is older than %s", t.UTC().Format(time.RFC3339), MaxAge)
	}
	return Event{Seq: md.Sequence.Stream, Time: t, Usage: ev}, nil
}

// Store hands the roll-up of events to core, retrying with backoff while ctx
// lasts (beat is called before each retry, to keep the events' deliveries
// alive). Deltas core reports as split are sent again one event each. The
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
		if refusedCall(err) {
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
			if len(g.Events) == 1 {
				// Cannot happen: one event is either applied or not.
				r.log.Error("single-event usage delta reported split", "machine", g.Delta.GetMachineId(), "sequence", g.Events[0].Seq)
				continue
			}
			again = append(again, Split(g)...)
		}
		if len(again) > 0 {
			r.log.Info("usage deltas mixing applied and new events, sent again per event", "events", len(again))
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
		if last || refusedCall(err) {
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

// refusedCall reports whether core refused a call as such (malformed or too
// large): sending it again cannot help.
func refusedCall(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.ResourceExhausted:
		return true
	}
	return false
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
