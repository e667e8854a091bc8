package spine_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// Consume ends with ErrConsumeEnded when its consumer is deleted, so that
// its caller creates it again (nats.go would pull from the deleted one for
// ever), and returns nil when its context ends.
func TestConsumeEndsWhenItsConsumerIsDeleted(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	// Deleted while its pull waits (the server answers it "consumer
	// deleted"), and as a message is acknowledged: the pull nats.go sends
	// then is not answered, and the one after its heartbeats went missing
	// finds no consumer.
	for durable, settle := range map[string]time.Duration{"waiting": 200 * time.Millisecond, "acknowledging": 0} {
		cons, err := js.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: "work." + durable})
		require.NoError(t, err)
		done, got := make(chan error, 1), make(chan string, 1)
		go func() {
			done <- spine.Consume(ctx, cons, func(m jetstream.Msg) {
				got <- string(m.Data())
				_ = m.Ack()
			}, slog.New(slog.DiscardHandler), false, jetstream.PullMaxMessages(1), jetstream.PullExpiry(2*time.Second))
		}()
		_, err = js.Publish(ctx, "work."+durable, []byte("job"))
		require.NoError(t, err)
		select {
		case data := <-got:
			assert.Equal(t, "job", data)
		case <-time.After(10 * time.Second):
			t.Fatal("the message was not handed on")
		}
		time.Sleep(settle)
		require.NoError(t, js.DeleteConsumer(ctx, "WORK", durable))
		select {
		case err := <-done:
			require.ErrorIs(t, err, spine.ErrConsumeEnded, durable)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Consume went on with its consumer deleted", durable)
		}
	}

	cons, err := js.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: "b", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- spine.Consume(ctx, cons, func(jetstream.Msg) {}, slog.New(slog.DiscardHandler), false) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not end with its context")
	}
}

// Keep starts a failed run again after a backoff that grows while runs
// fail at once, and starts over after a run that lasted: a consumer that
// failed a few times early in a long life is not left waiting the longest
// backoff when it fails again.
func TestKeepBacksOffAndStartsOver(t *testing.T) {
	defer spine.SetKeepTimings(10*time.Millisecond, 5*time.Second, 200*time.Millisecond)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var starts []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		spine.Keep(ctx, slog.New(slog.DiscardHandler), "test", func(context.Context) error {
			starts = append(starts, time.Now())
			switch len(starts) {
			case 7:
				time.Sleep(300 * time.Millisecond) // a run that lasted
			case 8:
				cancel()
			}
			return errors.New("failed")
		})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Keep did not end with its context")
	}
	require.Len(t, starts, 8)
	// Backoffs of 10, 20, 40, 80, 160, 320 ms; then 10 ms again, not 640.
	assert.GreaterOrEqual(t, starts[6].Sub(starts[5]), 320*time.Millisecond, "the backoff grew")
	assert.Less(t, starts[7].Sub(starts[6]), 300*time.Millisecond+320*time.Millisecond, "and started over after a run that lasted")
}

// lateStop is a consumer whose consumption's Stop returns only once
// nats.go has unsubscribed (as when the goroutine that stopped it is
// descheduled right after Stop).
type lateStop struct{ jetstream.Consumer }

func (c lateStop) Consume(h jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	cc, err := c.Consumer.Consume(h, opts...)
	return lateStopContext{cc}, err
}

type lateStopContext struct{ jetstream.ConsumeContext }

func (cc lateStopContext) Stop() {
	cc.ConsumeContext.Stop()
	time.Sleep(200 * time.Millisecond)
}

// Consume returns only once the callback in hand has returned, however
// late after Stop it looks for the consumption closed: nats.go reports a
// stopped consumption closed as soon as it unsubscribed, with a callback
// still running (a job consumer's waiting for a handler slot, which it
// then starts after its Run returned).
func TestConsumeWaitsForTheCallbackInHand(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}})
	require.NoError(t, err)
	cons, err := js.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	in, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- spine.Consume(ctx, lateStop{cons}, func(m jetstream.Msg) {
			close(in)
			<-release
			_ = m.Ack()
		}, slog.New(slog.DiscardHandler), false)
	}()
	_, err = js.Publish(ctx, "work.1", []byte("job"))
	require.NoError(t, err)
	select {
	case <-in:
	case <-time.After(10 * time.Second):
		t.Fatal("the message was not handed on")
	}
	cancel()
	select {
	case <-done:
		t.Fatal("Consume returned with its callback still running")
	case <-time.After(time.Second):
	}
	close(release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not return once its callback had")
	}
}
