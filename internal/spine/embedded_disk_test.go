package spine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// A moment of full disk used to leave the stream it hit refusing every
// write, without an answer, for the life of the process (nats-server keeps
// a store's first write error). The embedded server now restarts JetStream
// once there is room: what was stored before is kept, the write that failed
// was never acknowledged, and writes, bucket puts and a durable consumer go
// on.
func TestEmbeddedWritesAgainOnceTheDiskHasRoom(t *testing.T) {
	spinetest.SmallDisk(t, 64<<20, func(t *testing.T, dir string) {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		e, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: filepath.Join(dir, "data"), Logger: log})
		require.NoError(t, err)
		defer e.Shutdown()
		nc, err := e.Connect("test", log)
		require.NoError(t, err)
		defer nc.Close()
		e.OnStoreRestart(func() { _ = nc.ForceReconnect() })
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		ctx := context.Background()
		stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage, MaxBytes: 16 << 20, Duplicates: time.Minute})
		require.NoError(t, err)
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B", Storage: jetstream.FileStorage})
		require.NoError(t, err)
		cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy})
		require.NoError(t, err)
		got := make(chan string, 100)
		cc, err := cons.Consume(func(m jetstream.Msg) {
			got <- string(m.Data()[:8])
			_ = m.Ack()
		})
		require.NoError(t, err)
		defer cc.Stop()

		publish := func(id string, wait time.Duration) error {
			pctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			data := make([]byte, 32<<10)
			copy(data, fmt.Sprintf("%-8s", id))
			_, err := js.Publish(pctx, "t.a", data, jetstream.WithMsgID(id))
			return err
		}
		require.NoError(t, publish("before", time.Second))
		_, err = kv.Put(ctx, "k", []byte("before"))
		require.NoError(t, err)
		assert.Equal(t, "before  ", <-got)
		assert.False(t, e.StoreFailing())

		free := spinetest.Fill(t, dir)
		// Writes fail while the disk is full (each message is larger than
		// what is left), and keep failing: no restart without room.
		for i := range 3 {
			assert.Error(t, publish(fmt.Sprintf("full-%d", i), 500*time.Millisecond))
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = kv.Put(pctx, "k", make([]byte, 64<<10))
		cancel()
		assert.Error(t, err, "a bucket write on a full disk")
		assert.True(t, e.StoreFailing())
		time.Sleep(2 * time.Second)
		assert.Zero(t, e.StoreRestarts(), "restarted with no room")

		free()
		// The publisher's retry of a message that failed goes through
		// once JetStream is back, and once only.
		require.Eventually(t, func() bool { return publish("full-0", time.Second) == nil },
			30*time.Second, 200*time.Millisecond, "writes are taken again once the disk has room")
		require.NoError(t, publish("full-0", time.Second))
		require.NoError(t, publish("after", time.Second))
		assert.False(t, e.StoreFailing())
		assert.Equal(t, int64(1), e.StoreRestarts())

		info, err := stream.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), info.State.Msgs, "before, full-0 once, after")
		_, err = kv.Put(ctx, "k", []byte("after"))
		require.NoError(t, err)
		v, err := kv.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, "after", string(v.Value()))
		for _, want := range []string{"full-0  ", "after   "} {
			select {
			case id := <-got:
				assert.Equal(t, want, id)
			case <-time.After(10 * time.Second):
				// Its pull requests died with JetStream; the reconnection
				// after the restart renews them (else they would be
				// renewed after missed heartbeats, half a minute on).
				t.Fatalf("the durable consumer did not get %q after the restart", want)
			}
		}
	})
}
