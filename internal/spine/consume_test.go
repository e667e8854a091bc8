package spine_test

import (
	"context"
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
