package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/workers/internal/jobs"
)

// Two workers that create their consumer together on a cluster that just
// started both take jobs at once: the one whose first pull found no
// consumer leader to take it (one of them in every try on three members)
// pulls again, rather than taking no job for the 30 s until nats.go misses
// two heartbeats. Each handles one job at a time and holds at most one
// more, waiting for its slot: of three jobs, two are handled together only
// when both workers take jobs.
func TestConsumersCreatedTogetherOnAClusterBothTakeJobs(t *testing.T) {
	c := spinetest.StartCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var workers []jetstream.JetStream
	for i := range 2 {
		nc, err := nats.Connect(c.URL(i))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		workers = append(workers, js)
	}
	require.NoError(t, spine.EnsureStreams(ctx, workers[0], spine.Topology{Replicas: 3}.Streams()...))

	taken := make(chan string, 3)
	release := make(chan struct{})
	done := make(chan error, len(workers))
	for _, js := range workers {
		consumer := jobs.Consumer[*busv1.CatalogRefreshJob]{
			Durable: "catalog-refresh",
			Subject: spine.SubjectCatalogRefresh + ".>",
			New:     func() *busv1.CatalogRefreshJob { return new(busv1.CatalogRefreshJob) },
			Handle: func(_ context.Context, job *busv1.CatalogRefreshJob) error {
				taken <- job.GetConnectionId()
				<-release
				return nil
			},
			Concurrency: 1,
		}
		go func() { done <- consumer.Run(ctx, js, slog.New(slog.DiscardHandler)) }()
	}
	t.Cleanup(func() {
		close(release)
		cancel()
		for range workers {
			assert.NoError(t, <-done)
		}
	})
	for _, id := range []string{"c1", "c2", "c3"} {
		publishJob(t, ctx, workers[0], id)
	}

	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case id := <-taken:
			got = append(got, id)
		case <-timeout:
			t.Fatalf("jobs handled together: %v, want two", got)
		}
	}
	assert.Subset(t, []string{"c1", "c2", "c3"}, got)
}

// retryLater is a handler's error naming when a retry may succeed.
type retryLater time.Duration

func (r retryLater) Error() string             { return "rate limited" }
func (r retryLater) RetryAfter() time.Duration { return time.Duration(r) }

// A job whose handler failed with an error naming a wait (a token
// endpoint's Retry-After) is redelivered no sooner than that wait, where
// the first retry comes after 2 s.
func TestJobRedeliveredAfterTheWaitItsErrorNames(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, spine.EnsureStreams(ctx, js, spine.Topology{Replicas: 1}.Streams()...))

	const wait = 4 * time.Second
	handled := make(chan time.Time, 4)
	var calls atomic.Int32
	consumer := jobs.Consumer[*busv1.CatalogRefreshJob]{
		Durable: "catalog-refresh",
		Subject: spine.SubjectCatalogRefresh + ".>",
		New:     func() *busv1.CatalogRefreshJob { return new(busv1.CatalogRefreshJob) },
		Handle: func(context.Context, *busv1.CatalogRefreshJob) error {
			handled <- time.Now()
			if calls.Add(1) == 1 {
				return fmt.Errorf("refresh c1: %w", retryLater(wait))
			}
			return nil
		},
		Concurrency: 1,
	}
	runWithJob(t, ctx, cancel, js, consumer, "c1")

	var first time.Time
	select {
	case first = <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("the job was not handled")
	}
	select {
	case again := <-handled:
		assert.GreaterOrEqual(t, again.Sub(first), wait, "redelivered before the wait its error named")
	case <-time.After(wait + 10*time.Second):
		t.Fatal("the job was not redelivered")
	}
}

// A handler knows its job's last attempt, after which a failure is not
// retried: the attempts before it are not marked.
func TestHandlerToldOfTheLastAttempt(t *testing.T) {
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, spine.EnsureStreams(ctx, js, spine.Topology{Replicas: 1}.Streams()...))

	lasts := make(chan bool, 4)
	consumer := jobs.Consumer[*busv1.CatalogRefreshJob]{
		Durable: "catalog-refresh",
		Subject: spine.SubjectCatalogRefresh + ".>",
		New:     func() *busv1.CatalogRefreshJob { return new(busv1.CatalogRefreshJob) },
		Handle: func(ctx context.Context, _ *busv1.CatalogRefreshJob) error {
			lasts <- jobs.LastAttempt(ctx)
			return errors.New("endpoint down")
		},
		Concurrency: 1,
		MaxDeliver:  2,
	}
	runWithJob(t, ctx, cancel, js, consumer, "c1")

	var got []bool
	for len(got) < 2 {
		select {
		case last := <-lasts:
			got = append(got, last)
		case <-time.After(15 * time.Second):
			t.Fatalf("attempts seen: %v, want two", got)
		}
	}
	assert.Equal(t, []bool{false, true}, got)
	select {
	case last := <-lasts:
		t.Fatalf("a third attempt (last %v) after the last one", last)
	case <-time.After(3 * time.Second):
	}
}

// runWithJob runs consumer until the test ends (cancel then stops it, and
// its Run must end without error), and publishes one catalog-refresh job
// of connection id.
func runWithJob(t *testing.T, ctx context.Context, cancel context.CancelFunc, js jetstream.JetStream, consumer jobs.Consumer[*busv1.CatalogRefreshJob], id string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, js, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	publishJob(t, ctx, js, id)
}

// publishJob publishes a catalog-refresh job of connection id.
func publishJob(t *testing.T, ctx context.Context, js jetstream.JetStream, id string) {
	t.Helper()
	data, err := proto.Marshal(&busv1.CatalogRefreshJob{ConnectionId: id})
	require.NoError(t, err)
	_, err = js.Publish(ctx, spine.SubjectCatalogRefresh+"."+id, data)
	require.NoError(t, err)
}
