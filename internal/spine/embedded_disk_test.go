package spine_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// A job a worker finished while the disk was full leaves the job queue
// once JetStream is restarted, and every job queued is handled. Its
// acknowledgement reached the consumer, but the queue could not remove the
// job (the store refused writes), and after the restart the consumer held
// it done while the queue still held it: nothing delivered it again or
// removed it, and it sat in SB_JOBS until the queue's age bound, a day on.
// A job finished ahead of one queued before it, which was still running,
// leaves too, once that one is done.
func TestEmbeddedFinishedJobsLeaveTheQueueAfterAFullDisk(t *testing.T) {
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
		streams := spine.Topology{}.Streams()
		jobs := streams[slices.IndexFunc(streams, func(s jetstream.StreamConfig) bool { return s.Name == spine.StreamJobs })]
		require.NoError(t, spine.EnsureStreams(ctx, js, jobs))
		stream, err := js.Stream(ctx, spine.StreamJobs)
		require.NoError(t, err)
		// As the workers consume jobs.
		cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "catalog-refresh",
			FilterSubject: spine.SubjectCatalogRefresh + ".>", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		require.NoError(t, err)
		held := map[string]chan struct{}{"slow": make(chan struct{}), "held": make(chan struct{})}
		handled := make(chan string, 100)
		cc, err := cons.Consume(func(m jetstream.Msg) {
			id := string(m.Data())
			go func() {
				if h, ok := held[id]; ok {
					<-h
				}
				assert.NoError(t, m.DoubleAck(ctx), "ack of %s", id)
				handled <- id
			}()
		})
		require.NoError(t, err)
		defer cc.Stop()
		queue := func(id string) error {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := js.Publish(pctx, spine.SubjectCatalogRefresh+"."+id, []byte(id), jetstream.WithMsgID(id))
			return err
		}
		// A job larger than what is left of a full disk.
		queueLarge := func() error {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := js.Publish(pctx, spine.SubjectCatalogRefresh+".large", make([]byte, 64<<10))
			return err
		}
		next := func() string {
			select {
			case id := <-handled:
				return id
			case <-time.After(10 * time.Second):
				t.Fatal("no job handled")
				return ""
			}
		}

		require.NoError(t, queue("first"))
		assert.Equal(t, "first", next())
		require.NoError(t, queue("slow"))
		require.NoError(t, queue("held"))
		require.Eventually(t, func() bool {
			ci, err := cons.Info(ctx)
			return err == nil && ci.NumAckPending == 2
		}, 10*time.Second, 10*time.Millisecond, "both jobs taken")

		free := spinetest.Fill(t, dir)
		assert.Error(t, queueLarge(), "a job queued on a full disk")
		close(held["held"])
		assert.Equal(t, "held", next(), "finished while the disk is full")
		free()
		require.Eventually(t, func() bool { return e.StoreRestarts() == 1 }, 30*time.Second, 100*time.Millisecond)

		close(held["slow"])
		assert.Equal(t, "slow", next())
		require.NoError(t, queue("after"))
		assert.Equal(t, "after", next())
		require.Eventually(t, func() bool {
			info, err := stream.Info(ctx)
			return err == nil && info.State.Msgs == 0
		}, 30*time.Second, 100*time.Millisecond, "a job done is left in the queue")
	})
}
