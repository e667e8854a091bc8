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
	e, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	nc, err := e.Connect("test", nil)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
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
