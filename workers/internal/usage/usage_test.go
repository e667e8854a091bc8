package usage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

const (
	machineA = "0123456789abcdef"
	machineB = "fedcba9876543210"
	token    = "admin-token"
)

func event(seq uint64, machine string, at time.Time, conn string, status int32, prompt int64) Event {
	return Event{Seq: seq, Time: at, Usage: &busv1.UsageEvent{
		RequestId: fmt.Sprintf("req-%d", seq), MachineId: machine, Provider: "openai", Model: "text-embedding-3-small",
		ConnectionId: conn, KeyId: "k1", Endpoint: "embeddings", Status: status,
		PromptTokens: prompt, TotalTokens: prompt, LatencyMs: 10, Time: timestamppb.New(at),
	}}
}

func TestBuild(t *testing.T) {
	day1 := time.Date(2026, 3, 4, 9, 15, 0, 0, time.UTC)
	day2 := time.Date(2026, 3, 5, 0, 5, 0, 0, time.UTC)
	groups := Build([]Event{
		event(1, machineB, day1, "c1", 200, 5),
		event(2, machineA, day1, "c1", 200, 3),
		event(3, machineA, day1.Add(10*time.Minute), "c1", 500, 0),
		event(4, machineA, day1.Add(time.Hour), "c2", 200, 4),
		event(5, machineA, day2, "c1", 200, 1),
		event(3, machineA, day1, "c1", 500, 0), // the same event twice in a batch
	})
	require.Len(t, groups, 3)
	assert.Equal(t, []string{machineA + " 2026-03-04", machineA + " 2026-03-05", machineB + " 2026-03-04"},
		[]string{groups[0].Delta.MachineId + " " + groups[0].Delta.Day, groups[1].Delta.MachineId + " " + groups[1].Delta.Day, groups[2].Delta.MachineId + " " + groups[2].Delta.Day})

	a := groups[0].Delta
	assert.Equal(t, []uint64{2, 3, 4}, a.Sequences)
	require.Len(t, a.Rows, 2)
	assert.EqualValues(t, 9, a.Rows[0].Hour)
	assert.Equal(t, "c1", a.Rows[0].ConnectionId)
	c := a.Rows[0].Counters
	assert.EqualValues(t, 2, c.Requests)
	assert.EqualValues(t, 1, c.Errors, "status 500 is an error")
	assert.EqualValues(t, 3, c.PromptTokens)
	assert.EqualValues(t, 20, c.LatencyMs)
	assert.EqualValues(t, 10, a.Rows[1].Hour)
	assert.Equal(t, "c2", a.Rows[1].ConnectionId)
	assert.Len(t, groups[0].Events, 3)

	assert.EqualValues(t, 0, groups[1].Delta.Rows[0].Hour)

	split := Split(groups[0])
	require.Len(t, split, 3)
	for _, g := range split {
		assert.Len(t, g.Delta.Sequences, 1)
		assert.Len(t, g.Delta.Rows, 1)
		assert.EqualValues(t, 1, g.Delta.Rows[0].Counters.Requests)
	}
}

// fakeCore stands in for core's ApplyUsage: it counts each stream sequence
// once, reports split deltas as core does, and can fail on demand.
type fakeCore struct {
	mu sync.Mutex
	// fail answers Unavailable without applying, this many times.
	fail int
	// loseReply applies, then answers Unavailable (as if the worker died
	// before reading the answer), this many times.
	loseReply int
	// refuse lists machines whose documents refuse every write, refuseDay
	// the days whose documents do.
	refuse, refuseDay map[string]bool
	// invalid lists machines whose deltas make core refuse the whole call.
	invalid map[string]bool
	applied map[uint64]bool
	totals  busv1.UsageCounters
	calls   int
	splits  int
	// most is the most requests one call applied.
	most int64
	// delay is how long a call takes before core looks at it.
	delay time.Duration
}

func newFakeCore() *fakeCore { return &fakeCore{applied: map[uint64]bool{}} }

func (f *fakeCore) ApplyUsage(ctx context.Context, in *corev1.ApplyUsageRequest, _ ...grpc.CallOption) (*corev1.ApplyUsageResponse, error) {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	md, _ := metadata.FromOutgoingContext(ctx)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+token {
		return nil, status.Error(codes.Unauthenticated, "no admin token")
	}
	if f.fail > 0 {
		f.fail--
		return nil, status.Error(codes.Unavailable, "core is down")
	}
	for _, d := range in.Deltas {
		if f.invalid[d.MachineId] {
			return nil, status.Error(codes.InvalidArgument, "invalid delta")
		}
	}
	resp := &corev1.ApplyUsageResponse{}
	var call busv1.UsageCounters
	defer func() { f.most = max(f.most, call.Requests) }()
	for i, d := range in.Deltas {
		if f.refuse[d.MachineId] || f.refuseDay[d.Day] {
			resp.Failed = append(resp.Failed, int32(i))
			continue
		}
		seen := 0
		for _, s := range d.Sequences {
			if f.applied[s] || s <= in.AckFloor {
				seen++
			}
		}
		switch {
		case seen == len(d.Sequences):
			resp.Duplicates++
		case seen > 0:
			resp.Split = append(resp.Split, int32(i))
			f.splits++
		default:
			for _, s := range d.Sequences {
				f.applied[s] = true
			}
			for _, r := range d.Rows {
				addCounters(&f.totals, r.Counters)
				addCounters(&call, r.Counters)
			}
			resp.Applied++
		}
	}
	if f.loseReply > 0 {
		f.loseReply--
		return nil, status.Error(codes.Unavailable, "reply lost")
	}
	return resp, nil
}

func (f *fakeCore) requests() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.totals.Requests
}

func TestStoreSendsSplitDeltasPerEvent(t *testing.T) {
	core := newFakeCore()
	core.applied[2] = true // applied before, then redelivered with new events
	r := New(core, token, Config{}, slog.New(slog.DiscardHandler))
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	_, err := r.Store(context.Background(), 0, []Event{event(1, machineA, at, "c", 200, 1), event(2, machineA, at, "c", 200, 1), event(3, machineA, at, "c", 200, 1)}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, core.calls, "the mixed delta is sent again, per event")
	assert.Equal(t, 1, core.splits)
	assert.EqualValues(t, 2, core.requests(), "events 1 and 3 counted, 2 not twice")
}

// A delta mixing applied and new messages is sent again per message, not
// per event: the events of one batch message share its sequence, and one
// of them alone would make core take the others for duplicates.
func TestStoreSplitsMixedDeltasPerMessage(t *testing.T) {
	core := newFakeCore()
	core.applied[2] = true
	r := New(core, token, Config{}, slog.New(slog.DiscardHandler))
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	b0, b1 := event(5, machineA, at, "c", 200, 1), event(5, machineA, at, "c", 200, 1)
	b1.Index = 1
	_, err := r.Store(context.Background(), 0, []Event{event(2, machineA, at, "c", 200, 1), b0, b1}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, core.splits)
	assert.EqualValues(t, 2, core.requests(), "both events of message 5 counted, 2 not twice")
}

// A call core refuses as a whole is sent again delta by delta: the
// refused machine's events come back as failed, the others are stored.
func TestStoreIsolatesACallCoreRefuses(t *testing.T) {
	core := newFakeCore()
	core.invalid = map[string]bool{machineA: true}
	r := New(core, token, Config{}, slog.New(slog.DiscardHandler))
	at := time.Now()
	failed, err := r.Store(context.Background(), 0, []Event{event(1, machineA, at, "c", 200, 1), event(2, machineB, at, "c", 200, 1), event(3, machineB, at, "c", 200, 1)}, nil)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	assert.EqualValues(t, 1, failed[0].Seq)
	assert.EqualValues(t, 2, core.requests())
}

// startNATS runs an embedded nats-server with the spine's streams.
func startNATS(t *testing.T) jetstream.JetStream {
	t.Helper()
	js := spinetest.JetStream(t)
	require.NoError(t, spine.EnsureStreams(context.Background(), js, spine.Topology{}.Streams()...))
	return js
}

func publish(t *testing.T, js jetstream.JetStream, evs ...Event) {
	t.Helper()
	for _, e := range evs {
		data, err := proto.Marshal(e.Usage)
		require.NoError(t, err)
		_, err = js.Publish(context.Background(), spine.SubjectUsage+"."+e.Usage.MachineId, data, jetstream.WithMsgID(e.Usage.RequestId))
		require.NoError(t, err)
	}
}

func consumerSettled(t *testing.T, cons jetstream.Consumer) bool {
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	return info.NumAckPending == 0 && info.NumPending == 0
}

func TestRunRollsUpEveryEventOnce(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	core.fail = 1      // core down at first: nothing acknowledged, retried
	core.loseReply = 1 // then stored but the answer lost: retried, not counted twice
	lost := prometheus.NewCounter(prometheus.CounterOpts{Name: "lost"})
	r := New(core, token, Config{Batch: 7, MaxWait: 50 * time.Millisecond, Lost: lost}, slog.New(slog.DiscardHandler))
	now := time.Now()
	var evs []Event
	for i := range 40 {
		evs = append(evs, event(uint64(i+1), []string{machineA, machineB}[i%2], now, "c", 200, 2))
	}
	evs = append(evs, Event{Usage: &busv1.UsageEvent{RequestId: "bad", MachineId: "not-a-machine"}})
	evs = append(evs, Event{Usage: &busv1.UsageEvent{RequestId: "old", MachineId: machineA, Time: timestamppb.New(now.Add(-MaxAge - time.Hour))}})
	publish(t, js, evs...)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, js) }()
	cons, err := js.Consumer(context.Background(), spine.StreamUsage, Durable)
	require.Eventually(t, func() bool {
		if err != nil {
			cons, err = js.Consumer(context.Background(), spine.StreamUsage, Durable)
			return false
		}
		return core.requests() == 40 && consumerSettled(t, cons)
	}, 20*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.EqualValues(t, 40, core.requests())
	assert.EqualValues(t, 80, core.totals.PromptTokens)
	assert.Zero(t, counted(t, lost), "nothing was removed from the stream")
}

// A machine whose document refuses every write does not hold up another
// machine's events; its events go to the dead-letter stream after
// MaxDeliver deliveries, and the consumer moves on.
func TestRefusedDocumentIsIsolatedAndDeadLettered(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	core.refuse = map[string]bool{machineA: true}
	r := New(core, token, Config{Batch: 5, MaxWait: 50 * time.Millisecond, MaxDeliver: 2}, slog.New(slog.DiscardHandler))
	now := time.Now()
	var evs []Event
	for i := range 20 {
		evs = append(evs, event(uint64(i+1), []string{machineA, machineB}[i%2], now, "c", 200, 1))
	}
	publish(t, js, evs...)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, js) }()
	require.Eventually(t, func() bool { return core.requests() == 10 }, 20*time.Second, 20*time.Millisecond, "machine B rolled up")

	dead, err := js.Stream(context.Background(), spine.StreamUsageDead)
	require.NoError(t, err)
	cons, err := js.Consumer(context.Background(), spine.StreamUsage, Durable)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := dead.Info(context.Background())
		require.NoError(t, err)
		return info.State.Msgs == 10 && consumerSettled(t, cons)
	}, 30*time.Second, 50*time.Millisecond, "machine A's events dead-lettered")
	cancel()
	require.NoError(t, <-done)

	info, err := dead.Info(context.Background(), jetstream.WithSubjectFilter(spine.SubjectUsageDead+"."+machineA))
	require.NoError(t, err)
	assert.EqualValues(t, 10, info.State.Subjects[spine.SubjectUsageDead+"."+machineA])
	assert.EqualValues(t, 10, core.requests())
}

// A worker that dies after core stored its batch and before acknowledging
// it: the batch is delivered again and core does not count it twice.
func TestRedeliveryAfterAWorkerDied(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	lost := prometheus.NewCounter(prometheus.CounterOpts{Name: "lost"})
	r := New(core, token, Config{Batch: 100, MaxWait: 50 * time.Millisecond, Lost: lost}, slog.New(slog.DiscardHandler))
	now := time.Now()
	var evs []Event
	for i := range 10 {
		evs = append(evs, event(uint64(i+1), machineA, now, "c", 200, 1))
	}
	publish(t, js, evs...)

	ctx := context.Background()
	cons, err := r.Consumer(ctx, js)
	require.NoError(t, err)
	// The first worker takes six events, stores them and dies.
	msgs := fetchAll(t, cons, 6)
	var taken []Event
	for _, m := range msgs {
		evs, dead, err := r.decode(m)
		require.NoError(t, err)
		require.Empty(t, dead)
		taken = append(taken, evs...)
	}
	require.Len(t, taken, 6)
	failed, err := r.Store(ctx, 0, taken, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	require.EqualValues(t, 6, core.requests())
	// Its deliveries are handed back, as their AckWait would.
	for _, m := range msgs {
		require.NoError(t, m.Nak())
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, js) }()
	require.Eventually(t, func() bool { return consumerSettled(t, cons) }, 20*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.EqualValues(t, 10, core.requests(), "six redelivered events, counted once")
	assert.Zero(t, counted(t, lost), "redeliveries are not a loss")
}

// The workers were away while the usage stream ran past its size bound:
// the messages it removed before the roll-up took them are counted and
// logged as lost when the roll-up comes back, and the rest is rolled up.
func TestMessagesRemovedBeforeTheRollUpAreCountedLost(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx := context.Background()
	require.NoError(t, spine.EnsureStreams(ctx, js, spine.Topology{UsageMaxBytes: 16 << 10}.Streams()...))
	core := newFakeCore()
	lost := prometheus.NewCounter(prometheus.CounterOpts{Name: "lost"})
	var logs strings.Builder
	r := New(core, token, Config{Batch: 1000, MaxWait: 50 * time.Millisecond, Lost: lost}, slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)))
	now := time.Now()
	seq := uint64(0)
	next := func(n int) []Event {
		var evs []Event
		for range n {
			seq++
			evs = append(evs, event(seq, machineA, now, "c", 200, 1))
		}
		return evs
	}
	publish(t, js, next(5)...)
	// The consumer reads settled before its first fetch: wait for the
	// events as well.
	runRoller(t, r, js, func(c jetstream.Consumer) bool { return core.requests() == 5 && consumerSettled(t, c) })
	require.EqualValues(t, 5, core.requests())
	require.Zero(t, counted(t, lost))

	// Away: the stream runs past its bound and removes the oldest.
	publish(t, js, next(400)...)
	stream, err := js.Stream(ctx, spine.StreamUsage)
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Greater(t, info.State.FirstSeq, uint64(6), "the bound removed messages the roll-up had not taken")
	removed := info.State.FirstSeq - 6 // sequences 6 .. FirstSeq-1

	// Settled once what the stream holds is rolled up: the consumer's
	// counts alone can read settled before the roll-up has fetched (its
	// pending count lags the stream's removals).
	runRoller(t, r, js, func(c jetstream.Consumer) bool {
		return uint64(core.requests()) >= 5+info.State.Msgs && consumerSettled(t, c)
	})
	assert.EqualValues(t, removed, counted(t, lost), "every removed message counted once")
	assert.EqualValues(t, 5+info.State.Msgs, core.requests(), "what the stream still held is rolled up")
	assert.Contains(t, logs.String(), "usage events lost")
	assert.Contains(t, logs.String(), fmt.Sprintf("messages=%d first_sequence=6", removed))
}

// counted is the value of c.
func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// syncWriter serializes writes to w (a log shared by goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestRowOfClipsLongDimensions(t *testing.T) {
	long := func(c string) string { return "openai/" + strings.Repeat(c, 5000) }
	a := RowOf(&busv1.UsageEvent{Model: long("a") + "é"}, 0)
	b := RowOf(&busv1.UsageEvent{Model: long("a") + "è"}, 0)
	assert.LessOrEqual(t, len(a.Model), maxDimension)
	assert.True(t, utf8.ValidString(a.Model))
	assert.NotEqual(t, a.Model, b.Model, "distinct ids stay distinct")
	assert.Equal(t, "openai/gpt-4o", RowOf(&busv1.UsageEvent{Model: "openai/gpt-4o"}, 0).Model)
	multi := RowOf(&busv1.UsageEvent{Model: strings.Repeat("é", 1000)}, 0)
	assert.True(t, utf8.ValidString(multi.Model))
	assert.LessOrEqual(t, len(multi.Model), maxDimension)
}

// publishBatch publishes evs as one batch message of machine.
func publishBatch(t *testing.T, js jetstream.JetStream, machine string, evs ...*busv1.UsageEvent) {
	t.Helper()
	msg := nats.NewMsg(spine.SubjectUsage + "." + machine)
	for _, ev := range evs {
		data, err := proto.Marshal(ev)
		require.NoError(t, err)
		msg.Data = usagebatch.Append(msg.Data, data)
	}
	usagebatch.SetHeader(msg.Header, len(evs))
	// Compressed when core's publisher would compress it.
	var compressed bool
	if msg.Data, compressed = usagebatch.Compress(msg.Data); compressed {
		usagebatch.MarkCompressed(msg.Header)
	}
	_, err := js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
}

// deadLetters reads the dead-letter stream.
func deadLetters(t *testing.T, js jetstream.JetStream) []jetstream.Msg {
	t.Helper()
	cons, err := js.OrderedConsumer(context.Background(), spine.StreamUsageDead, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var out []jetstream.Msg
	for {
		batch, err := cons.FetchNoWait(100)
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			out = append(out, m)
			n++
		}
		if n == 0 {
			return out
		}
	}
}

func runRoller(t *testing.T, r *Roller, js jetstream.JetStream, settled func(jetstream.Consumer) bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, js) }()
	cons, err := js.Consumer(context.Background(), spine.StreamUsage, Durable)
	require.Eventually(t, func() bool {
		if err != nil {
			cons, err = js.Consumer(context.Background(), spine.StreamUsage, Durable)
			return false
		}
		return settled(cons)
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// A stream mixing messages of one event (as every publisher wrote them
// before batches) and batch messages: every event is rolled up once, a
// lost reply of core notwithstanding, and the events of a batch that
// cannot be rolled up (an invalid machine id, too old) go to the
// dead-letter stream alone, one message each, without their batch's others.
func TestBatchAndSingleMessagesRollUpEveryEventOnce(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	core.loseReply = 1
	// A fetch bound below a batch message's size is raised to what the
	// server takes: the message is delivered all the same.
	r := New(core, token, Config{Batch: 3, FetchBytes: 1024, MaxWait: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	now := time.Now()
	ev := func(machine string, prompt int64) *busv1.UsageEvent {
		return event(0, machine, now, "c", 200, prompt).Usage
	}
	publish(t, js, event(1, machineA, now, "c", 200, 1), event(2, machineB, now, "c", 200, 1))
	var big []*busv1.UsageEvent
	for range 100 {
		big = append(big, ev(machineA, 2))
	}
	publishBatch(t, js, machineA, big...)
	bad := &busv1.UsageEvent{RequestId: "bad", MachineId: "not-a-machine", PromptTokens: 1000}
	old := &busv1.UsageEvent{RequestId: "old", MachineId: machineB, PromptTokens: 1000, Time: timestamppb.New(now.Add(-MaxAge - time.Hour))}
	publishBatch(t, js, machineB, ev(machineB, 3), bad, ev(machineB, 3), old)
	publish(t, js, event(3, machineA, now, "c", 200, 4))
	publishBatch(t, js, machineA, ev(machineA, 5), ev(machineA, 5))

	runRoller(t, r, js, func(cons jetstream.Consumer) bool {
		return core.requests() == 107 && consumerSettled(t, cons)
	})
	assert.EqualValues(t, 107, core.requests())
	assert.EqualValues(t, 1+1+200+6+4+10, core.totals.PromptTokens)

	dead := deadLetters(t, js)
	require.Len(t, dead, 2)
	for i, want := range []*busv1.UsageEvent{bad, old} {
		m := dead[i]
		assert.False(t, usagebatch.IsBatch(m.Headers()), "a dead event goes alone")
		var got busv1.UsageEvent
		require.NoError(t, proto.Unmarshal(m.Data(), &got))
		assert.Equal(t, want.RequestId, got.RequestId)
		assert.Equal(t, spine.SubjectUsageDead+"."+machineB, m.Subject())
		assert.Equal(t, []string{"1", "3"}[i], m.Headers().Get("Sb-Original-Index"))
	}
}

// A fetch of many full batch messages is rolled up a part at a time: the
// roll-up never holds the whole fetch decoded (a few hundred bytes of
// protobuf an event) beside the gateway's traffic, and every event is
// still counted once.
func TestLargeFetchRolledUpInParts(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	r := New(core, token, Config{MaxWait: 200 * time.Millisecond}, slog.New(slog.DiscardHandler))
	now := time.Now()
	const messages, each = 12, 256
	for range messages {
		publishBatch(t, js, machineA, fullBatch(machineA, now, each)...)
	}
	runRoller(t, r, js, func(cons jetstream.Consumer) bool {
		return core.requests() == messages*each && consumerSettled(t, cons)
	})
	core.mu.Lock()
	defer core.mu.Unlock()
	assert.EqualValues(t, messages*each, core.totals.Requests)
	assert.LessOrEqual(t, core.most, int64(chunkEvents+each), "one call to core carried the whole fetch")
}

// While a fetch's earlier parts are stored, one by one, through a slow
// core, its later parts' messages are kept alive: no message of the fetch
// passes its AckWait and goes to another worker while this one still
// holds it, though no call to core failed.
func TestLaterPartsKeptInProgressWhileEarlierOnesAreStored(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	// A call takes a little over a quarter of the AckWait, so the parts
	// still held are renewed before each call, about 0.8 s apart where
	// their AckWait is 3 s; not renewed, the last part, stored after 4 s,
	// would pass it a second before.
	core.delay = 800 * time.Millisecond
	r := New(core, token, Config{}, slog.New(slog.DiscardHandler))
	now := time.Now()
	const messages, each = 20, 256 // five parts of four messages
	for range messages {
		publishBatch(t, js, machineA, fullBatch(machineA, now, each)...)
	}
	ctx := context.Background()
	cons, err := js.CreateOrUpdateConsumer(ctx, spine.StreamUsage, jetstream.ConsumerConfig{
		Durable: Durable, FilterSubject: spine.SubjectUsage + ".>", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 3 * time.Second, MaxDeliver: -1,
	})
	require.NoError(t, err)
	msgs := fetchAll(t, cons, messages)

	done := make(chan struct{})
	go func() { defer close(done); r.Process(ctx, cons, msgs) }()
	// Another worker of the fleet pulls meanwhile.
	var redelivered []uint64
	for {
		select {
		case <-done:
		default:
			other, err := cons.Fetch(messages, jetstream.FetchMaxWait(100*time.Millisecond))
			require.NoError(t, err)
			for m := range other.Messages() {
				redelivered = append(redelivered, seqOf(m))
			}
			continue
		}
		break
	}
	assert.Empty(t, redelivered, "messages another worker got while the first was storing their part")
	assert.EqualValues(t, messages*each, core.requests())
	// The server takes in acknowledgements a moment after they are sent.
	assert.Eventually(t, func() bool { return consumerSettled(t, cons) }, 10*time.Second, 10*time.Millisecond, "every message acknowledged")
}

// coreAway answers through core for its first answers calls, then
// cancels the worker's context and fails every call, as a core gone while
// a worker stops, until back; sent counts the sequences of the deltas core
// answered.
type coreAway struct {
	*fakeCore
	mu      sync.Mutex
	answers int
	back    bool
	cancel  context.CancelFunc
	sent    map[uint64]int
}

func (c *coreAway) ApplyUsage(ctx context.Context, in *corev1.ApplyUsageRequest, opts ...grpc.CallOption) (*corev1.ApplyUsageResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == 0 && !c.back {
		c.cancel()
		return nil, status.Error(codes.Unavailable, "core is down")
	}
	c.answers--
	resp, err := c.fakeCore.ApplyUsage(ctx, in, opts...)
	if err == nil {
		for _, d := range in.Deltas {
			for _, s := range d.Sequences {
				c.sent[s]++
			}
		}
	}
	return resp, err
}

// A fetch whose second part cannot be stored (core gone as the worker
// stops) keeps the first part stored and acknowledged, and hands the
// second and the rest back: once core is back every event is counted
// once, no message's events are sent to core again after core answered
// for them, and a dead event of a later part goes to the dead-letter
// stream once.
func TestSecondPartFailingHandsBackTheRest(t *testing.T) {
	js := startNATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	core := &coreAway{fakeCore: newFakeCore(), answers: 1, cancel: cancel, sent: map[uint64]int{}}
	r := New(core, token, Config{}, slog.New(slog.DiscardHandler))
	r.js = js
	now := time.Now()
	const messages, each = 12, 256 // parts of about four messages
	for i := range messages {
		evs := fullBatch(machineA, now, each)
		if i == 5 {
			evs[7] = &busv1.UsageEvent{RequestId: "bad", MachineId: "not-a-machine"}
		}
		publishBatch(t, js, machineA, evs...)
	}
	cons, err := r.Consumer(ctx, js)
	require.NoError(t, err)
	msgs := fetchAll(t, cons, messages)

	// The first part is stored; core is gone for the second.
	r.Process(ctx, cons, msgs)
	require.EqualValues(t, 4*each, core.requests(), "the first part alone is stored")
	// The server takes in acknowledgements a moment after they are sent.
	require.Eventually(t, func() bool {
		info, err := cons.Info(context.Background())
		require.NoError(t, err)
		return info.AckFloor.Stream == 4
	}, 10*time.Second, 10*time.Millisecond, "the first part is acknowledged")
	assert.Empty(t, deadLetters(t, js), "the later part's dead event waits for its part")
	// The rest is handed back at once, not left to its AckWait (a minute).
	held := fetchUpTo(t, cons, 8)
	assert.Equal(t, []uint64{5, 6, 7, 8, 9, 10, 11, 12}, seqs(held))
	for _, m := range held {
		require.NoError(t, m.Nak())
	}

	core.mu.Lock()
	core.back = true
	core.mu.Unlock()
	runRoller(t, New(core, token, Config{MaxWait: 50 * time.Millisecond}, slog.New(slog.DiscardHandler)), js,
		func(c jetstream.Consumer) bool { return core.requests() == messages*each-1 && consumerSettled(t, c) })
	assert.EqualValues(t, messages*each-1, core.requests())
	core.mu.Lock()
	for seq, n := range core.sent {
		assert.Equal(t, 1, n, "message %d sent to core again after core answered for it", seq)
	}
	assert.Len(t, core.sent, messages)
	core.mu.Unlock()
	dead := deadLetters(t, js)
	require.Len(t, dead, 1)
	assert.Equal(t, "6", dead[0].Headers().Get("Sb-Original-Sequence"))
}

// stopAtFirstCall is a core that stops the worker (stop) as its first
// call comes in, at stopped.
type stopAtFirstCall struct {
	*fakeCore
	stop    context.CancelFunc
	stopped time.Time
}

func (c *stopAtFirstCall) ApplyUsage(ctx context.Context, in *corev1.ApplyUsageRequest, opts ...grpc.CallOption) (*corev1.ApplyUsageResponse, error) {
	if c.stopped.IsZero() {
		c.stopped = time.Now()
		c.stop()
	}
	return c.fakeCore.ApplyUsage(ctx, in, opts...)
}

// A worker told to stop while it stores a fetch's first part gives that
// part its last attempt and hands the rest back at once, so it stops
// within one call to core, where it went on storing part after part
// through a slow core, each part a last attempt of its own.
func TestStopHandsBackThePartsNotYetStored(t *testing.T) {
	js := startNATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	core := &stopAtFirstCall{fakeCore: newFakeCore(), stop: cancel}
	core.delay = time.Second
	r := New(core, token, Config{}, slog.New(slog.DiscardHandler))
	now := time.Now()
	const messages, each = 16, 256 // four parts of four messages
	for range messages {
		publishBatch(t, js, machineA, fullBatch(machineA, now, each)...)
	}
	cons, err := r.Consumer(ctx, js)
	require.NoError(t, err)
	msgs := fetchAll(t, cons, messages)

	r.Process(ctx, cons, msgs)
	// The part in flight takes the second of its call; the three parts
	// after it would take three more.
	assert.Less(t, time.Since(core.stopped), 2500*time.Millisecond, "the stop waited for the parts after the one in flight")
	assert.EqualValues(t, 4*each, core.requests(), "the part in flight is stored")
	// The rest is handed back at once, not left to its AckWait (a minute).
	back := seqs(fetchUpTo(t, cons, 12))
	assert.Equal(t, []uint64{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, back)
}

// A batch message whose framing is broken, or whose compressed payload
// cannot be read, goes to the dead-letter stream whole, its headers kept
// (the copy reads as the original did), and holds nothing else up.
func TestBrokenBatchIsDeadLetteredWhole(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	r := New(core, token, Config{Batch: 10, MaxWait: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	broken := nats.NewMsg(spine.SubjectUsage + "." + machineA)
	broken.Data = []byte{0x0a, 0x7f, 0x01}
	usagebatch.SetHeader(broken.Header, 3)
	unreadable := nats.NewMsg(spine.SubjectUsage + "." + machineA)
	unreadable.Data = []byte("not an S2 block at all")
	usagebatch.SetHeader(unreadable.Header, 2)
	usagebatch.MarkCompressed(unreadable.Header)
	for _, msg := range []*nats.Msg{broken, unreadable} {
		_, err := js.PublishMsg(context.Background(), msg)
		require.NoError(t, err)
	}
	publish(t, js, event(1, machineA, time.Now(), "c", 200, 1))

	runRoller(t, r, js, func(cons jetstream.Consumer) bool {
		return core.requests() == 1 && consumerSettled(t, cons)
	})
	dead := deadLetters(t, js)
	require.Len(t, dead, 2)
	assert.Equal(t, broken.Data, dead[0].Data())
	assert.Equal(t, "3", dead[0].Headers().Get(contract.HeaderUsageEvents))
	assert.Empty(t, dead[0].Headers().Get(contract.HeaderUsageEncoding))
	assert.Equal(t, unreadable.Data, dead[1].Data())
	assert.Equal(t, "2", dead[1].Headers().Get(contract.HeaderUsageEvents))
	assert.Equal(t, contract.UsageEncodingS2, dead[1].Headers().Get(contract.HeaderUsageEncoding))
}

// A batch whose events fall in two documents, one of which refuses every
// write: the other document's events are rolled up once (the redeliveries
// of the batch do not count them again), and at MaxDeliver only the
// refused document's events go to the dead-letter stream, one message each.
func TestRefusedEventsOfABatchAreDeadLetteredAlone(t *testing.T) {
	js := startNATS(t)
	core := newFakeCore()
	now := time.Now().UTC()
	yesterday := now.Add(-24 * time.Hour)
	core.refuseDay = map[string]bool{yesterday.Format(dayLayout): true}
	r := New(core, token, Config{Batch: 10, MaxWait: 50 * time.Millisecond, MaxDeliver: 2}, slog.New(slog.DiscardHandler))
	var evs []*busv1.UsageEvent
	for i := range 6 {
		at := now
		if i%3 == 0 {
			at = yesterday
		}
		e := event(0, machineA, at, "c", 200, 1).Usage
		e.RequestId = fmt.Sprintf("req-%d", i)
		evs = append(evs, e)
	}
	publishBatch(t, js, machineA, evs...)

	runRoller(t, r, js, func(cons jetstream.Consumer) bool {
		return len(deadLetters(t, js)) == 2 && consumerSettled(t, cons)
	})
	assert.EqualValues(t, 4, core.requests(), "today's events counted once over the deliveries")
	dead := deadLetters(t, js)
	require.Len(t, dead, 2)
	for i, m := range dead {
		var got busv1.UsageEvent
		require.NoError(t, proto.Unmarshal(m.Data(), &got))
		assert.Equal(t, []string{"req-0", "req-3"}[i], got.RequestId)
		assert.Equal(t, []string{"0", "3"}[i], m.Headers().Get("Sb-Original-Index"))
		assert.Equal(t, "its roll-up document refused it", m.Headers().Get("Sb-Reason"))
	}
}

// A worker that stops again and again while core cannot be reached (a
// crash loop, a rolling restart during a core outage) hands its batch back
// each time: however many times, the batch is rolled up once core answers,
// where the stream stopped delivering it after a dozen deliveries and its
// events were never counted.
func TestManyStopsWhileCoreIsAwayLoseNothing(t *testing.T) {
	js := startNATS(t)
	down := newFakeCore()
	down.fail = 1 << 30
	now := time.Now()
	publish(t, js, event(1, machineA, now, "c", 200, 3), event(2, machineB, now, "c", 200, 4))

	run := func(core *fakeCore) (stop func()) {
		r := New(core, token, Config{Batch: 10, MaxWait: 20 * time.Millisecond}, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx, js) }()
		return func() { cancel(); require.NoError(t, <-done) }
	}
	for i := range 15 {
		calls := func() int { down.mu.Lock(); defer down.mu.Unlock(); return down.calls }
		before := calls()
		stop := run(down)
		require.Eventually(t, func() bool { return calls() > before }, 10*time.Second, 5*time.Millisecond, "stop %d: the batch was delivered", i+1)
		stop()
	}

	up := newFakeCore()
	stop := run(up)
	defer stop()
	cons, err := js.Consumer(context.Background(), spine.StreamUsage, Durable)
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return up.requests() == 2 && consumerSettled(t, cons) }, 10*time.Second, 20*time.Millisecond)
	up.mu.Lock()
	defer up.mu.Unlock()
	assert.EqualValues(t, 7, up.totals.PromptTokens)
}

// fullBatch is n events of one request each of machine's, at, for one
// batch message.
func fullBatch(machine string, at time.Time, n int) []*busv1.UsageEvent {
	evs := make([]*busv1.UsageEvent, n)
	for i := range evs {
		evs[i] = event(0, machine, at, "c", 200, 1).Usage
	}
	return evs
}

// fetchAll fetches n messages of cons, all of them.
func fetchAll(t *testing.T, cons jetstream.Consumer, n int) []jetstream.Msg {
	t.Helper()
	msgs := fetchUpTo(t, cons, n)
	require.Len(t, msgs, n)
	return msgs
}

// fetchUpTo fetches n messages of cons, as soon as it has them to deliver,
// or those it delivered within 10 s.
func fetchUpTo(t *testing.T, cons jetstream.Consumer, n int) []jetstream.Msg {
	t.Helper()
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	return msgs
}

// seqs is the stream sequences of msgs.
func seqs(msgs []jetstream.Msg) []uint64 {
	var out []uint64
	for _, m := range msgs {
		out = append(out, seqOf(m))
	}
	return out
}
