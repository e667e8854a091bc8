package spine

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sweep of the work queues (dropAcknowledged) leaves every job not yet
// acknowledged: one delivered and still running, one not yet delivered,
// another consumer's, whatever was acknowledged after them.
func TestSweepKeepsJobsNotYetAcknowledged(t *testing.T) {
	e, js, s := sweptQueue(t)
	ctx := context.Background()
	consumer := func(name string) jetstream.Consumer {
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, FilterSubject: "q." + name + ".>",
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		require.NoError(t, err)
		return c
	}
	a, b := consumer("a"), consumer("b")
	for _, subj := range []string{"q.a.1", "q.a.2", "q.a.3", "q.b.1", "q.b.2"} {
		_, err := js.Publish(ctx, subj, []byte(subj))
		require.NoError(t, err)
	}
	take := func(c jetstream.Consumer, n int) []jetstream.Msg {
		batch, err := c.FetchNoWait(n)
		require.NoError(t, err)
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		require.NoError(t, batch.Error())
		require.Len(t, msgs, n)
		return msgs
	}
	stored := func() []string {
		var subjects []string
		for seq := uint64(1); seq <= 5; seq++ {
			if m, err := s.GetMsg(ctx, seq); err == nil {
				subjects = append(subjects, m.Subject)
			}
		}
		return subjects
	}

	as := take(a, 2)
	require.NoError(t, as[1].DoubleAck(ctx)) // q.a.2 done ahead of q.a.1
	require.NoError(t, take(b, 1)[0].DoubleAck(ctx))
	require.NoError(t, e.dropAcknowledged())
	assert.Equal(t, []string{"q.a.1", "q.a.3", "q.b.2"}, stored())

	require.NoError(t, as[0].DoubleAck(ctx))
	require.NoError(t, e.dropAcknowledged())
	assert.Equal(t, []string{"q.a.3", "q.b.2"}, stored())
}

// A job a worker asked to have again (a NAK, at once or after a delay)
// comes back when asked after a sweep that removed a message its consumer
// was done with, where nats-server's purge of the consumer's messages up to
// its floor dropped the jobs waiting for redelivery, which then came back
// only after the consumer's AckWait (40 s for jobs).
func TestSweepKeepsNakedJobsComingBackWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		nak  func(jetstream.Msg) error
	}{
		{"nak", func(m jetstream.Msg) error { return m.Nak() }},
		{"nak with delay", func(m jetstream.Msg) error { return m.NakWithDelay(200 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, js, s := sweptQueue(t)
			ctx := context.Background()
			c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "a", FilterSubject: "q.a.>",
				AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: 2})
			require.NoError(t, err)
			for _, subj := range []string{"q.a.given-up", "q.a.done", "q.a.retried"} {
				_, err := js.Publish(ctx, subj, []byte(subj))
				require.NoError(t, err)
			}
			// A NAK is taken in once the server says so.
			naks, err := js.Conn().SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.Q.a")
			require.NoError(t, err)
			naked := func() {
				_, err := naks.NextMsg(5 * time.Second)
				require.NoError(t, err, "no NAK advisory")
			}
			take := func(wait time.Duration) jetstream.Msg {
				batch, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
				require.NoError(t, err)
				var got jetstream.Msg
				for m := range batch.Messages() {
					got = m
				}
				require.NoError(t, batch.Error())
				return got
			}

			// The first job uses up its deliveries, and once the next is
			// done its consumer's floor passes it: the consumer is done with
			// it, and the queue keeps it, as it keeps a job acknowledged
			// while the disk was full.
			for range 2 {
				m := take(time.Second)
				require.NotNil(t, m)
				require.Equal(t, "q.a.given-up", m.Subject())
				require.NoError(t, m.Nak())
				naked()
			}
			m := take(time.Second)
			require.NotNil(t, m)
			require.Equal(t, "q.a.done", m.Subject())
			require.NoError(t, m.DoubleAck(ctx))
			m = take(time.Second)
			require.NotNil(t, m)
			require.Equal(t, "q.a.retried", m.Subject())
			ci, err := c.Info(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(2), ci.AckFloor.Stream, "the consumer is done with the first two jobs")

			// The last is asked for again while no worker is pulling, and
			// (its delay past) waits for one when the sweep runs.
			require.NoError(t, tc.nak(m))
			naked()
			time.Sleep(600 * time.Millisecond)
			require.NoError(t, e.dropAcknowledged())
			_, err = s.GetMsg(ctx, 1)
			assert.ErrorIs(t, err, jetstream.ErrMsgNotFound, "the job the consumer was done with is left in the queue")

			start := time.Now()
			m = take(5 * time.Second)
			require.NotNil(t, m, "the job asked for again did not come back within 5s (AckWait 30s)")
			assert.Equal(t, "q.a.retried", m.Subject())
			assert.Less(t, time.Since(start), 2*time.Second)
			require.NoError(t, m.DoubleAck(ctx))
		})
	}
}

// One sweep removes at most the messages it is given leave to, those of the
// consumer's subject up to its floor, and none other.
func TestSweepRemovesABoundedRunOfOneSubject(t *testing.T) {
	_, js, s := sweptQueue(t)
	ctx := context.Background()
	subjects := []string{"q.a.1", "q.b.1", "q.a.2", "q.a.3", "q.b.2", "q.a.4", "q.a.5"}
	for _, subj := range subjects {
		_, err := js.Publish(ctx, subj, []byte(subj))
		require.NoError(t, err)
	}
	stored := func() []string {
		var left []string
		for seq := range uint64(len(subjects)) {
			if m, err := s.GetMsg(ctx, seq+1); err == nil {
				left = append(left, m.Subject)
			}
		}
		return left
	}

	n, from, to, err := dropUpTo(ctx, s, "q.a.>", 1, 6, 2)
	require.NoError(t, err)
	assert.Equal(t, []uint64{2, 1, 3}, []uint64{uint64(n), from, to})
	assert.Equal(t, []string{"q.b.1", "q.a.3", "q.b.2", "q.a.4", "q.a.5"}, stored())

	n, from, to, err = dropUpTo(ctx, s, "q.a.>", 1, 6, 2)
	require.NoError(t, err)
	assert.Equal(t, []uint64{2, 4, 6}, []uint64{uint64(n), from, to})
	assert.Equal(t, []string{"q.b.1", "q.b.2", "q.a.5"}, stored())

	n, _, _, err = dropUpTo(ctx, s, "q.a.>", 1, 6, 2)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, []string{"q.b.1", "q.b.2", "q.a.5"}, stored())
}

// removedMeanwhile is a stream whose queue removes the message gone when
// the sweep finds it, before the sweep deletes it, as a work queue does
// with a job its worker acknowledged a moment before the sweep read the
// consumer's floor.
type removedMeanwhile struct {
	jetstream.Stream
	gone uint64
}

func (s removedMeanwhile) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	m, err := s.Stream.GetMsg(ctx, seq, opts...)
	if err == nil && m.Sequence == s.gone {
		if err := s.Stream.DeleteMsg(ctx, m.Sequence); err != nil {
			return nil, err
		}
	}
	return m, err
}

// A job the work queue removes itself while the sweep is at it (its
// acknowledgement, processed as the sweep reads the floor it moved) is
// gone, as the sweep wants: the sweep goes on with the next ones, where it
// failed on it ("no message found") and swept nothing more until the next
// sweep.
func TestSweepGoesOnPastAJobTheQueueRemovedMeanwhile(t *testing.T) {
	_, js, s := sweptQueue(t)
	ctx := context.Background()
	for _, subj := range []string{"q.a.1", "q.a.2", "q.a.3"} {
		_, err := js.Publish(ctx, subj, []byte(subj))
		require.NoError(t, err)
	}

	n, from, to, err := dropUpTo(ctx, removedMeanwhile{s, 1}, "q.a.>", 1, 2, 10)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 2}, []uint64{uint64(n), from, to}, "the sweep removed the second job")
	for seq := range uint64(2) {
		_, err = s.GetMsg(ctx, seq+1)
		assert.ErrorIs(t, err, jetstream.ErrMsgNotFound)
	}
	_, err = s.GetMsg(ctx, 3)
	assert.NoError(t, err, "the job above the floor stays")
}

// sweptQueue starts an embedded server holding a work-queue stream Q of
// the subjects q.>, and returns the server, a client's JetStream and Q.
func sweptQueue(t *testing.T) (*Embedded, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	e, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	nc, err := e.Connect("test", nil)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	return e, js, s
}
