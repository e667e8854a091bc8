package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/billing/internal/account"
	"github.com/switchboardhq/switchboard/billing/internal/store"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// fakeFlows counts runs; each run answers the next queued error, else a
// subscription named after the run. With a gate set, a run waits for it.
type fakeFlows struct {
	mu      sync.Mutex
	runs    int
	errs    []error
	gate    chan struct{}
	entered chan struct{}
}

func (f *fakeFlows) run(ctx context.Context) (*billingv1.SubscriptionRecord, error) {
	f.mu.Lock()
	f.runs++
	n := f.runs
	var err error
	if len(f.errs) > 0 {
		err, f.errs = f.errs[0], f.errs[1:]
	}
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		close(f.entered)
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return &billingv1.SubscriptionRecord{Subscription: &billingv1.Subscription{Id: fmt.Sprintf("sub_%d", n)}}, nil
}

func (f *fakeFlows) Runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs
}

func (f *fakeFlows) Checkout(ctx context.Context, _ account.User, _ billingv1.Plan, _ billingv1.Recurring, _ string) (string, error) {
	rec, err := f.run(ctx)
	return "https://checkout.test/" + rec.GetSubscription().GetId(), err
}

func (f *fakeFlows) Portal(ctx context.Context, _ account.User, _ string) (string, error) {
	rec, err := f.run(ctx)
	return "https://portal.test/" + rec.GetSubscription().GetId(), err
}

func (f *fakeFlows) Cancel(ctx context.Context, _ account.User, _ string) (*billingv1.SubscriptionRecord, error) {
	return f.run(ctx)
}

func (f *fakeFlows) Resume(ctx context.Context, _ account.User, _ string) (*billingv1.SubscriptionRecord, error) {
	return f.run(ctx)
}

func (f *fakeFlows) ChangeRecurring(ctx context.Context, _ account.User, _ billingv1.Recurring, _ string) (*billingv1.SubscriptionRecord, error) {
	return f.run(ctx)
}

// bucket is the sb_billing_idempotency bucket on an embedded NATS server.
func bucket(t *testing.T) jetstream.KeyValue {
	return spinetest.Bucket(t, store.BucketIdempotency, store.Buckets(1))
}

var alice = account.User{ID: "alice"}

// putRunning stores a record of a cancel with key "k" still running, as a
// replica that began it at startedAt (and maybe crashed) left it.
func putRunning(t *testing.T, kv jetstream.KeyValue, startedAt time.Time) {
	t.Helper()
	data, err := proto.Marshal(&billingv1.IdempotentCall{
		UserId: alice.ID, Operation: OpCancel, Fingerprint: fingerprint(OpCancel, nil),
		Attempt: "other-replica", StartedAt: timestamppb.New(startedAt),
	})
	require.NoError(t, err)
	_, err = kv.Create(context.Background(), recordKey(alice.ID, "k"), data)
	require.NoError(t, err)
}

func TestARunningCallIsWaitedForThenTakenOverOnceStale(t *testing.T) {
	kv := bucket(t)
	flows := &fakeFlows{}
	ctx := context.Background()
	putRunning(t, kv, time.Now())

	// Another replica runs it right now: this call waits, then gives up.
	waiting := New(flows, kv, Config{Wait: 20 * time.Millisecond}, nil)
	_, err := waiting.Cancel(ctx, alice, "k")
	require.ErrorIs(t, err, account.ErrKeyInUse)
	require.Zero(t, flows.Runs())
	// A caller about to give up gets the typed answer, not its deadline.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = New(flows, kv, Config{}, nil).Cancel(short, alice, "k")
	require.ErrorIs(t, err, account.ErrKeyInUse)
	require.Zero(t, flows.Runs())

	// Later than TakeOverAfter, that run is presumed crashed: taken over.
	later := New(flows, kv, Config{Now: func() time.Time { return time.Now().Add(time.Hour) }}, nil)
	rec, err := later.Cancel(ctx, alice, "k")
	require.NoError(t, err)
	require.Equal(t, "sub_1", rec.GetSubscription().GetId())
	rec, err = waiting.Cancel(ctx, alice, "k")
	require.NoError(t, err)
	require.Equal(t, "sub_1", rec.GetSubscription().GetId(), "the taken-over run's answer is kept")
	require.Equal(t, 1, flows.Runs())
}

func TestAStaleRecordOfAnotherCallIsStillRefused(t *testing.T) {
	kv := bucket(t)
	flows := &fakeFlows{}
	putRunning(t, kv, time.Now().Add(-time.Hour))
	_, err := New(flows, kv, Config{}, nil).Resume(context.Background(), alice, "k")
	require.ErrorIs(t, err, account.ErrKeyReused)
	require.Zero(t, flows.Runs())
}

func TestTheRunOutlivesItsCaller(t *testing.T) {
	kv := bucket(t)
	gate := make(chan struct{})
	flows := &fakeFlows{gate: gate, entered: make(chan struct{})}
	svc := New(flows, kv, Config{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := svc.Cancel(ctx, alice, "k")
		done <- err
	}()
	<-flows.entered
	cancel() // the client went away mid-run
	flows.mu.Lock()
	flows.gate = nil
	flows.mu.Unlock()
	close(gate)
	require.NoError(t, <-done, "the run finished regardless")
	rec, err := svc.Cancel(context.Background(), alice, "k")
	require.NoError(t, err)
	require.Equal(t, "sub_1", rec.GetSubscription().GetId())
	require.Equal(t, 1, flows.Runs())
}

func TestWhichOutcomesAreKept(t *testing.T) {
	tests := []struct {
		name     string
		first    error
		wantRuns int // after three calls with one key
	}{
		{"success", nil, 1},
		{"guard refusal", account.ErrCanceled, 1},
		{"bad request", account.BadRequest("recurring is required"), 1},
		{"stripe unavailable", account.ErrProviderUnavailable, 2},
		{"stripe refused a checkout (502)", account.ErrCheckoutFailed, 2},
		{"internal error", errors.New("nats: timeout"), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flows := &fakeFlows{errs: []error{tt.first}}
			svc := New(flows, bucket(t), Config{}, nil)
			ctx := context.Background()
			_, err1 := svc.Cancel(ctx, alice, "k")
			require.ErrorIs(t, err1, tt.first)
			_, err2 := svc.Cancel(ctx, alice, "k")
			rec3, err3 := svc.Cancel(ctx, alice, "k")
			require.Equal(t, tt.wantRuns, flows.Runs())
			require.Equal(t, err2, err3)
			if tt.wantRuns == 1 && tt.first != nil {
				require.ErrorIs(t, err2, tt.first, "the error is replayed")
				var e *account.Error
				require.ErrorAs(t, err2, &e)
				require.Equal(t, tt.first.(*account.Error).Status, e.Status)
				require.Equal(t, tt.first.Error(), e.Message)
			} else {
				require.NoError(t, err2)
				require.Equal(t, fmt.Sprintf("sub_%d", tt.wantRuns), rec3.GetSubscription().GetId())
			}
		})
	}
}

func TestWithoutAKeyEveryCallRuns(t *testing.T) {
	flows := &fakeFlows{}
	svc := New(flows, bucket(t), Config{}, nil)
	for range 3 {
		_, err := svc.Checkout(context.Background(), alice, billingv1.Plan_PLAN_UNSPECIFIED, billingv1.Recurring_RECURRING_MONTHLY, "")
		require.NoError(t, err)
	}
	require.Equal(t, 3, flows.Runs())
}

func TestCheckoutPlanDefaultIsTheSameCall(t *testing.T) {
	flows := &fakeFlows{}
	svc := New(flows, bucket(t), Config{}, nil)
	ctx := context.Background()
	a, err := svc.Checkout(ctx, alice, billingv1.Plan_PLAN_UNSPECIFIED, billingv1.Recurring_RECURRING_MONTHLY, "k")
	require.NoError(t, err)
	b, err := svc.Checkout(ctx, alice, billingv1.Plan_PLAN_PRO, billingv1.Recurring_RECURRING_MONTHLY, "k")
	require.NoError(t, err)
	require.Equal(t, a, b)
	_, err = svc.Checkout(ctx, alice, billingv1.Plan_PLAN_TEAM, billingv1.Recurring_RECURRING_MONTHLY, "k")
	require.ErrorIs(t, err, account.ErrKeyReused)
	require.Equal(t, 1, flows.Runs())
}
