package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/internal/store"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/node/nodetest"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// On buckets replicated three ways (where NATS reports a lost
// compare-and-swap with another code than on one server), the second of two
// retries of one dead letter finds it gone, not an error.
func TestDeadLetterRetriedTwiceOnAReplicatedBucket(t *testing.T) {
	cluster := nodetest.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := cluster.JetStream(t, "billing-store-test")
	require.NoError(t, spine.EnsureBuckets(ctx, js, store.Buckets(3)...))
	st, err := store.Open(ctx, js, nodetest.Logger())
	require.NoError(t, err)

	require.NoError(t, st.PutDead(ctx, &billingv1.DeadEvent{EventId: "evt_1"}))
	_, rev, err := st.DeadEvent(ctx, "evt_1")
	require.NoError(t, err)
	require.NoError(t, st.DeleteDead(ctx, "evt_1", rev), "the first retry forgets it")
	assert.ErrorIs(t, st.DeleteDead(ctx, "evt_1", rev), store.ErrNoDeadLetter, "the second finds it gone")
}
