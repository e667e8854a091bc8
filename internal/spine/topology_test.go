package spine_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
)

func embedded(t *testing.T, port int) *spine.Embedded {
	t.Helper()
	e, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: t.TempDir(), Listen: true, Port: port})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	return e
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := spine.Connect(ctx, url, "test", nil)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// Many roles creating the topology at once on a fresh server all succeed:
// a concurrent creator's win is not an error.
func TestEnsureFromManyCreatorsAtOnce(t *testing.T) {
	e := embedded(t, 0)
	const creators = 8
	errs := make([]error, creators)
	var wg sync.WaitGroup
	for i := range creators {
		js, err := jetstream.New(connect(t, e.ClientURL()))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = spine.Topology{Replicas: 1}.Ensure(context.Background(), js)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "creator %d", i)
	}
	js, err := jetstream.New(connect(t, e.ClientURL()))
	require.NoError(t, err)
	for _, cfg := range (spine.Topology{}).Streams() {
		_, err := js.Stream(context.Background(), cfg.Name)
		assert.NoError(t, err, cfg.Name)
	}
	for _, cfg := range (spine.Topology{}).Buckets() {
		_, err := js.KeyValue(context.Background(), cfg.Bucket)
		assert.NoError(t, err, cfg.Bucket)
	}
}

// A definition the server refuses fails at once instead of being retried.
func TestEnsureRefusedDefinitionIsNotRetried(t *testing.T) {
	e := embedded(t, 0)
	js, err := jetstream.New(connect(t, e.ClientURL()))
	require.NoError(t, err)
	require.NoError(t, spine.Topology{}.Ensure(context.Background(), js))
	err = spine.EnsureStreams(context.Background(), js, jetstream.StreamConfig{Name: "OVERLAP", Subjects: []string{"sb.jobs.>"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OVERLAP")
	assert.NotContains(t, err.Error(), "gave up", "refused at the first attempt")
}

// A stream whose bound does not fit in the server's storage (a small disk:
// JetStream may use 75% of what was free) fails at once and says what to
// do, instead of two minutes of retries ending in the server's code.
func TestEnsureStreamLargerThanTheDiskFailsAtOnce(t *testing.T) {
	e := embedded(t, 0)
	js, err := jetstream.New(connect(t, e.ClientURL()))
	require.NoError(t, err)
	err = spine.EnsureStreams(context.Background(), js, jetstream.StreamConfig{Name: "HUGE", Subjects: []string{"huge.>"}, MaxBytes: 1 << 55})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SWITCHBOARD_USAGE_MAX_BYTES")
	assert.NotContains(t, err.Error(), "gave up", "refused at the first attempt")
}

// A role whose NATS server is not up yet waits for it instead of exiting.
func TestConnectWaitsForTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())

	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		nc, err := spine.Connect(ctx, "nats://127.0.0.1:"+strconv.Itoa(port), "early", nil)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Connect returned before any server was up: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	embedded(t, port)
	r := <-done
	require.NoError(t, r.err)
	defer r.nc.Close()
	assert.True(t, r.nc.IsConnected())
	js, err := jetstream.New(r.nc)
	require.NoError(t, err)
	require.NoError(t, spine.Topology{}.Ensure(context.Background(), js))
}

// With no server ever, Connect gives up when its context ends, naming no
// URL (it may carry credentials).
func TestConnectGivesUpWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := spine.Connect(ctx, "nats://user:hunter2@127.0.0.1:1", "never", nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
}

// Stored Responses answers are bounded by size as well as age: past the
// bound a new answer is stored and the oldest go, on a fresh bucket and
// after the topology is ensured again (a restart, where nats.go would set
// the bucket back to refusing new values).
func TestStoredAnswersPastTheirBoundPushTheOldestOut(t *testing.T) {
	e := embedded(t, 0)
	js, err := jetstream.New(connect(t, e.ClientURL()))
	require.NoError(t, err)
	ctx := context.Background()
	top := spine.Topology{Replicas: 1, UsageMaxBytes: 1 << 20, ResponsesMaxBytes: 1 << 20}
	for round := range 2 {
		require.NoError(t, top.Ensure(ctx, js), "round %d", round)
		kv, err := js.KeyValue(ctx, spine.BucketResponses)
		require.NoError(t, err)
		answer := make([]byte, 64<<10)
		for i := range 40 { // 2.5 MiB of answers into a bucket of 1 MiB
			_, err := kv.Put(ctx, "m."+strconv.Itoa(round)+"."+strconv.Itoa(i), answer)
			require.NoError(t, err, "round %d, answer %d: a new answer is stored", round, i)
		}
		_, err = kv.Get(ctx, "m."+strconv.Itoa(round)+".39")
		assert.NoError(t, err, "the newest answer is there")
		_, err = kv.Get(ctx, "m."+strconv.Itoa(round)+".0")
		assert.ErrorIs(t, err, jetstream.ErrKeyNotFound, "the oldest went")
		st, err := kv.Status(ctx)
		require.NoError(t, err)
		assert.LessOrEqual(t, st.Bytes(), uint64(1<<20))
	}
}
