package usage_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/core/internal/usage"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

const machine = "0123456789abcdef"

var quiet = slog.New(slog.DiscardHandler)

// server starts an embedded nats-server listening on loopback (port 0: a
// random one) with its store in dir.
func server(t *testing.T, dir string, port int) *spine.Embedded {
	t.Helper()
	srv, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: dir, Listen: true, Port: port})
	require.NoError(t, err)
	return srv
}

// connect opens a reconnecting client connection and a JetStream on it.
func connect(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := spine.Connect(context.Background(), url, "usage-test", quiet)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

func ensureUsageStream(t *testing.T, js jetstream.JetStream, mutate func(*jetstream.StreamConfig)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cfg := range (spine.Topology{}).Streams() {
		if cfg.Name == spine.StreamUsage && mutate != nil {
			mutate(&cfg)
		}
		_, err := js.CreateOrUpdateStream(ctx, cfg)
		require.NoError(t, err)
	}
}

// run starts p and returns a function that stops it and waits for the drain.
func run(t *testing.T, p *usage.Publisher) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go p.Run(ctx)
	stop := func() {
		cancel()
		<-p.Done()
	}
	t.Cleanup(stop)
	return stop
}

func event(i int) *busv1.UsageEvent {
	return &busv1.UsageEvent{MachineId: machine, Model: fmt.Sprintf("model-%d", i), Endpoint: "chat.completions", TotalTokens: int64(i), Status: 200}
}

// stored reads every message of SB_USAGE.
func stored(t *testing.T, js jetstream.JetStream) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, spine.StreamUsage, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var out []jetstream.Msg
	for {
		batch, err := cons.FetchNoWait(500)
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

// storedEvent is an event read back from SB_USAGE with the message that
// carried it.
type storedEvent struct {
	msg jetstream.Msg
	ev  *busv1.UsageEvent
}

// storedEvents reads every event of SB_USAGE, batches expanded, in order.
func storedEvents(t *testing.T, js jetstream.JetStream) []storedEvent {
	t.Helper()
	var out []storedEvent
	for _, m := range stored(t, js) {
		parts, err := usagebatch.Split(m.Headers(), m.Data())
		require.NoError(t, err)
		for _, p := range parts {
			ev := &busv1.UsageEvent{}
			require.NoError(t, proto.Unmarshal(p, ev))
			out = append(out, storedEvent{m, ev})
		}
	}
	return out
}

// streamEvents counts the events stored on SB_USAGE (batches expanded).
func streamEvents(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	return len(storedEvents(t, js))
}

// An event that cannot be encoded (a string that is not UTF-8) and one the
// stream refuses (over its message size) are skipped and counted; every
// good event around them arrives, each with its minted id, and a message
// of one event has that id as message id. Recorded before Run, the refused
// event is inside a batch with the good ones: the batch is split and only
// that event is skipped.
func TestPoisonEventsAreSkippedAndTheOthersFlow(t *testing.T) {
	for _, tt := range []struct {
		name      string
		beforeRun bool
	}{{"recorded while running", false}, {"inside one batch", true}} {
		t.Run(tt.name, func(t *testing.T) {
			srv := server(t, t.TempDir(), 0)
			t.Cleanup(srv.Shutdown)
			_, js := connect(t, srv.ClientURL())
			ensureUsageStream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 2048 })
			p, err := usage.NewPublisher(js, usage.Config{MaxRefusals: 2}, quiet)
			require.NoError(t, err)
			if !tt.beforeRun {
				run(t, p)
			}
			for i := range 50 {
				p.Record(event(i))
				if i == 10 {
					p.Record(&busv1.UsageEvent{MachineId: machine, Model: "bad\xff\xfe", Status: 200})
				}
				if i == 20 {
					// Too large for the stream even compressed (a batch goes
					// compressed, and S2 would shrink a repeated letter).
					var model strings.Builder
					for model.Len() < 4096 {
						model.WriteString(rand.Text())
					}
					p.Record(&busv1.UsageEvent{MachineId: machine, Model: model.String(), Status: 200})
				}
			}
			if tt.beforeRun {
				assert.Equal(t, 51, p.Stats().Buffered, "the unencodable event never entered the buffer")
				run(t, p)
			}
			require.Eventually(t, func() bool { return p.Stats().Buffered == 0 }, 30*time.Second, 20*time.Millisecond)
			st := p.Stats()
			assert.EqualValues(t, 50, st.Published)
			assert.EqualValues(t, 2, st.Refused)

			evs := storedEvents(t, js)
			require.Len(t, evs, 50)
			ids := map[string]bool{}
			for _, e := range evs {
				assert.NotEmpty(t, e.ev.GetEventId())
				assert.NotEqual(t, 4096, len(e.ev.GetModel()))
				if !usagebatch.IsBatch(e.msg.Headers()) {
					assert.Equal(t, e.ev.GetEventId(), e.msg.Headers().Get(jetstream.MsgIDHeader))
				}
				ids[e.ev.GetEventId()] = true
			}
			assert.Len(t, ids, 50, "every event has an id of its own")
		})
	}
}

// Events recorded faster than they are published leave as batches: fewer
// messages than events, one machine's events per message, each event
// exactly once, the counters counting events. An event recorded alone
// leaves alone, as a plain event message under its own id.
func TestEventsRecordedTogetherLeaveInBatches(t *testing.T) {
	srv := server(t, t.TempDir(), 0)
	t.Cleanup(srv.Shutdown)
	_, js := connect(t, srv.ClientURL())
	ensureUsageStream(t, js, nil)
	p, err := usage.NewPublisher(js, usage.Config{}, quiet)
	require.NoError(t, err)

	const other = "fedcba9876543210"
	want := map[string]string{} // event id: machine
	for i := range 1000 {
		ev := event(i)
		if i%5 == 0 {
			ev.MachineId = other
		}
		p.Record(ev)
		want[ev.GetEventId()] = ev.GetMachineId()
	}
	run(t, p) // everything is queued when it starts
	require.Eventually(t, func() bool { return p.Stats().Buffered == 0 }, 30*time.Second, 20*time.Millisecond)
	st := p.Stats()
	assert.EqualValues(t, 1000, st.Published)
	assert.Zero(t, st.Refused+st.Dropped+st.Retried)

	evs := storedEvents(t, js)
	require.Len(t, evs, 1000)
	msgIDs := map[string]bool{}
	got := map[string]int{}
	for _, e := range evs {
		got[e.ev.GetEventId()]++
		assert.Equal(t, spine.SubjectUsage+"."+e.ev.GetMachineId(), e.msg.Subject(), "a batch holds one machine's events")
		assert.Equal(t, want[e.ev.GetEventId()], e.ev.GetMachineId())
		assert.True(t, usagebatch.IsBatch(e.msg.Headers()))
		assert.Equal(t, contract.UsageEncodingS2, e.msg.Headers().Get(contract.HeaderUsageEncoding), "a batch this large goes compressed")
		msgIDs[e.msg.Headers().Get(jetstream.MsgIDHeader)] = true
	}
	assert.Len(t, got, 1000)
	for id, n := range got {
		require.Equal(t, 1, n, "event %s stored %d times", id, n)
	}
	// 800 and 200 events, at most 256 a batch.
	assert.Len(t, msgIDs, 4+1, "one message per batch, each with its own id")
	assert.Len(t, stored(t, js), 5)

	one := event(2000)
	p.Record(one)
	require.Eventually(t, func() bool { return p.Stats().Published == 1001 }, 10*time.Second, 10*time.Millisecond)
	msgs := stored(t, js)
	require.Len(t, msgs, 6)
	last := msgs[5]
	assert.False(t, usagebatch.IsBatch(last.Headers()), "a lone event is not made to wait for company")
	assert.Equal(t, one.GetEventId(), last.Headers().Get(jetstream.MsgIDHeader))
	var ev busv1.UsageEvent
	require.NoError(t, proto.Unmarshal(last.Data(), &ev))
	assert.Equal(t, one.GetEventId(), ev.GetEventId())
}

// A publish whose acknowledgement never comes (stored, then the ack lost,
// as when a stream leader dies between storing and acknowledging) is sent
// again after the ack timeout, the same batch under the same message id;
// the stream drops the second copy. A stand-in leader stores each message
// and never answers.
func TestPublishWithoutAckIsRetriedAndDeduplicated(t *testing.T) {
	srv := server(t, t.TempDir(), 0)
	t.Cleanup(srv.Shutdown)
	nc, js := connect(t, srv.ClientURL())
	const storedPrefix = "stored."
	ensureUsageStream(t, js, func(c *jetstream.StreamConfig) { c.Subjects = []string{storedPrefix + ">"} })

	const n = 20
	var (
		mu    sync.Mutex
		sent  = map[string][]byte{} // message id: data, as first sent
		again int                   // publishes of an id sent before
	)
	seen := make(chan struct{}, 100)
	// The stand-in stores the message (with its message id) under another
	// subject of the same stream and drops the reply: no ack comes.
	hole, err := nc.Subscribe(spine.SubjectUsage+".>", func(m *nats.Msg) {
		id := m.Header.Get(jetstream.MsgIDHeader)
		mu.Lock()
		if first, ok := sent[id]; ok {
			again++
			assert.Equal(t, first, m.Data, "a retry sends the batch intact")
		} else {
			sent[id] = m.Data
		}
		mu.Unlock()
		out := &nats.Msg{Subject: storedPrefix + m.Subject, Data: m.Data, Header: m.Header}
		_ = nc.PublishMsg(out)
		select {
		case seen <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	p, err := usage.NewPublisher(js, usage.Config{AckTimeout: 300 * time.Millisecond}, quiet)
	require.NoError(t, err)
	for i := range n {
		p.Record(event(i))
	}
	run(t, p) // the n events leave together
	<-seen
	require.Eventually(t, func() bool { return streamEvents(t, js) == n }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, n, p.Stats().Buffered, "no ack came: the events wait")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return again > 0 }, 10*time.Second, 20*time.Millisecond)

	// The stream now takes the subject itself (the new leader); the
	// stand-in goes.
	ensureUsageStream(t, js, func(c *jetstream.StreamConfig) {
		c.Subjects = []string{storedPrefix + ">", spine.SubjectUsage + ".>"}
	})
	require.NoError(t, hole.Unsubscribe())

	require.Eventually(t, func() bool { return p.Stats().Buffered == 0 }, 30*time.Second, 20*time.Millisecond)
	st := p.Stats()
	assert.EqualValues(t, n, st.Published)
	assert.GreaterOrEqual(t, st.Retried, int64(2*n), "retries count events")
	mu.Lock()
	assert.Len(t, sent, 1, "one batch, one message id, however often sent")
	mu.Unlock()
	evs := storedEvents(t, js)
	require.Len(t, evs, n, "the retries were de-duplicated")
	ids := map[string]bool{}
	for _, e := range evs {
		ids[e.ev.GetEventId()] = true
	}
	assert.Len(t, ids, n)
}

// NATS goes away: events wait in the buffer and are published once it is
// back.
func TestOutageBuffersThenPublishes(t *testing.T) {
	dir := t.TempDir()
	srv := server(t, dir, 0)
	url := srv.ClientURL()
	var port int
	_, err := fmt.Sscanf(url[strings.LastIndex(url, ":")+1:], "%d", &port)
	require.NoError(t, err)
	nc, js := connect(t, url)
	ensureUsageStream(t, js, nil)
	p, err := usage.NewPublisher(js, usage.Config{AckTimeout: time.Second}, quiet)
	require.NoError(t, err)
	run(t, p)

	for i := range 5 {
		p.Record(event(i))
	}
	require.Eventually(t, func() bool { return p.Stats().Published == 5 }, 10*time.Second, 20*time.Millisecond)

	srv.Shutdown()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	for i := range 100 {
		p.Record(event(100 + i))
	}
	assert.Equal(t, 100, p.Stats().Buffered)

	srv = server(t, dir, port)
	t.Cleanup(srv.Shutdown)
	require.Eventually(t, func() bool { return p.Stats().Buffered == 0 }, 60*time.Second, 50*time.Millisecond)
	st := p.Stats()
	assert.EqualValues(t, 105, st.Published)
	assert.Zero(t, st.Dropped)
	assert.EqualValues(t, 105, streamEvents(t, js))
}

// Past the buffer's bound new events are dropped and counted, never
// silently; what the buffer held is published.
func TestOverflowIsCounted(t *testing.T) {
	srv := server(t, t.TempDir(), 0)
	t.Cleanup(srv.Shutdown)
	_, js := connect(t, srv.ClientURL())
	ensureUsageStream(t, js, nil)
	p, err := usage.NewPublisher(js, usage.Config{MaxEvents: 10}, quiet)
	require.NoError(t, err)

	// Run is not running yet: nothing leaves the buffer.
	for i := range 25 {
		p.Record(event(i))
	}
	st := p.Stats()
	assert.Equal(t, 10, st.Buffered)
	assert.EqualValues(t, 15, st.Dropped)

	run(t, p)
	require.Eventually(t, func() bool { return p.Stats().Published == 10 }, 10*time.Second, 20*time.Millisecond)
	assert.EqualValues(t, 10, streamEvents(t, js))
}

// When Run's context ends, everything buffered is published before Run
// returns; events recorded after that are counted as dropped.
func TestDrainPublishesEverythingBeforeRunReturns(t *testing.T) {
	srv := server(t, t.TempDir(), 0)
	t.Cleanup(srv.Shutdown)
	_, js := connect(t, srv.ClientURL())
	ensureUsageStream(t, js, nil)
	p, err := usage.NewPublisher(js, usage.Config{}, quiet)
	require.NoError(t, err)

	const n = 3000
	for i := range n {
		p.Record(event(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Run(ctx) // returns only after the drain
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Run returned")
	}
	assert.EqualValues(t, n, p.Stats().Published)
	assert.EqualValues(t, n, streamEvents(t, js))

	p.Record(event(0))
	assert.EqualValues(t, 1, p.Stats().Dropped)
}

// Events of requests that finish during the drain (recorded after Run's
// context ended) are published too: here NATS is away when the drain
// starts, events keep coming, NATS comes back, and Run returns only once
// every one of them is stored.
func TestDrainPublishesEventsRecordedDuringIt(t *testing.T) {
	dir := t.TempDir()
	srv := server(t, dir, 0)
	url := srv.ClientURL()
	var port int
	_, err := fmt.Sscanf(url[strings.LastIndex(url, ":")+1:], "%d", &port)
	require.NoError(t, err)
	nc, js := connect(t, url)
	ensureUsageStream(t, js, nil)
	p, err := usage.NewPublisher(js, usage.Config{Drain: time.Minute, AckTimeout: time.Second}, quiet)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go p.Run(ctx)

	srv.Shutdown()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	for i := range 10 {
		p.Record(event(i))
	}
	cancel() // the drain starts, NATS away
	for i := range 10 {
		p.Record(event(10 + i)) // requests finishing during the drain
	}
	select {
	case <-p.Done():
		t.Fatal("Run returned with events unpublished")
	default:
	}
	srv = server(t, dir, port)
	t.Cleanup(srv.Shutdown)
	<-p.Done()
	st := p.Stats()
	assert.EqualValues(t, 20, st.Published)
	assert.Zero(t, st.Dropped)
	assert.EqualValues(t, 20, streamEvents(t, js))
}

// BenchmarkRecord is the request path's cost of a usage event: minting its
// id, encoding it and queuing it (the publisher drains in the background).
func BenchmarkRecord(b *testing.B) {
	js := spinetest.JetStream(b)
	require.NoError(b, spine.EnsureStreams(context.Background(), js, spine.Topology{}.Streams()...))
	p, err := usage.NewPublisher(js, usage.Config{}, quiet)
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	go p.Run(ctx)
	ev := event(1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ev.EventId = ""
		p.Record(ev)
	}
	b.StopTimer()
	cancel()
	<-p.Done()
	b.ReportMetric(float64(p.Stats().Dropped), "dropped")
}

// BenchmarkPublishUnderLoad records events from 32 goroutines that each
// wait 5ms (the upstream) and spend some CPU before recording, as the
// gateway's handlers do under load (about 6,000 events/s), and reports how
// many events a stream
// message carried and the process's CPU per event (the embedded
// nats-server's included): one event a message (as before batches), and
// batches published as soon as they are woken or after lingering 1 ms,
// 5 ms and 25 ms (the default).
func BenchmarkPublishUnderLoad(b *testing.B) {
	for _, tc := range []struct {
		name     string
		linger   time.Duration
		maxBatch int
	}{{"the load alone, no events", -1, 0}, {"one event a message", -1, 1}, {"batches", -1, 256}, {"batches, linger 1ms", time.Millisecond, 256}, {"batches, linger 5ms", 5 * time.Millisecond, 256}, {"batches, linger 25ms", 25 * time.Millisecond, 256}} {
		b.Run(tc.name, func(b *testing.B) {
			js := spinetest.JetStream(b)
			require.NoError(b, spine.EnsureStreams(context.Background(), js, spine.Topology{}.Streams()...))
			p, err := usage.NewPublisher(js, usage.Config{Linger: tc.linger}, quiet)
			require.NoError(b, err)
			usage.Tune(p, tc.maxBatch)
			ctx, cancel := context.WithCancel(context.Background())
			go p.Run(ctx)

			var (
				next atomic.Int64
				wg   sync.WaitGroup
				buf  = make([]byte, 4096)
			)
			before := cpuTime()
			b.ResetTimer()
			for range 32 {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						time.Sleep(5 * time.Millisecond) // the upstream answering
						for range 5 {
							_ = sha256.Sum256(buf)
						}
						if tc.maxBatch > 0 {
							p.Record(event(int(i)))
						}
					}
				})
			}
			wg.Wait()
			for range 10_000 {
				if p.Stats().Buffered == 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			used := cpuTime() - before
			cancel()
			<-p.Done()
			_, msgs, err := usagebatch.CountEvents(context.Background(), js, spine.StreamUsage)
			require.NoError(b, err)
			if tc.maxBatch > 0 {
				b.ReportMetric(float64(b.N)/float64(max(msgs, 1)), "events/msg")
			}
			b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-us/event")
		})
	}
}

// cpuTime is the CPU the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lossyJetStream stores the first message published through it but loses
// its acknowledgement (the connection dropped on the way back), then fails
// every publish without sending it until outage has passed (NATS away).
type lossyJetStream struct {
	jetstream.JetStream
	outage time.Duration
	// lostOnTheWay loses the first message itself, not its
	// acknowledgement.
	lostOnTheWay bool

	mu      sync.Mutex
	lost    bool
	up      time.Time
	lostErr error
}

func (l *lossyJetStream) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lost {
		l.lost = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if !l.lostOnTheWay {
			_, l.lostErr = l.JetStream.PublishMsg(ctx, m)
		}
		l.up = time.Now().Add(l.outage)
		return nil, nats.ErrConnectionClosed
	}
	if time.Now().Before(l.up) {
		return nil, nats.ErrDisconnected
	}
	return l.JetStream.PublishMsgAsync(m, opts...)
}

// A batch stored whose acknowledgement was lost, and sent again only after
// an outage longer than the stream's de-duplication window, would be
// stored twice and its events counted twice. The publisher looks for it in
// the stream first, finds it, and sends nothing again; one lost before it
// reached the stream is not found, and sent once NATS is back.
func TestBatchStoredBeforeALongOutageIsNotStoredTwice(t *testing.T) {
	for _, lostOnTheWay := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost on the way %v", lostOnTheWay), func(t *testing.T) {
			js := spinetest.JetStream(t)
			const window = time.Second
			ensureUsageStream(t, js, func(c *jetstream.StreamConfig) { c.Duplicates = window })
			p, err := usage.NewPublisher(js, usage.Config{AckTimeout: 300 * time.Millisecond, DedupWindow: window, Linger: -1}, quiet)
			require.NoError(t, err)
			lossy := &lossyJetStream{JetStream: js, outage: 3 * window, lostOnTheWay: lostOnTheWay}
			usage.SetJetStream(p, lossy)
			const n = 5
			for i := range n {
				p.Record(event(i))
			}
			run(t, p)
			require.Eventually(t, func() bool { return p.Stats().Buffered == 0 }, 20*time.Second, 20*time.Millisecond)
			lossy.mu.Lock()
			require.True(t, lossy.lost)
			require.NoError(t, lossy.lostErr)
			lossy.mu.Unlock()
			assert.EqualValues(t, n, p.Stats().Published)
			assert.Equal(t, n, streamEvents(t, js), "each event stored once")
			assert.Len(t, stored(t, js), 1, "one batch message")
		})
	}
}
