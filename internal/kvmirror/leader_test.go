package kvmirror

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// GetFromLeader answers a key's value and revision as a get does, and
// ErrNotFound for a key never written, deleted or purged.
func TestGetFromLeader(t *testing.T) {
	ctx := context.Background()
	js := spinetest.JetStream(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test"})
	require.NoError(t, err)
	rev, err := kv.Put(ctx, "a", []byte("one"))
	require.NoError(t, err)
	_, err = kv.Put(ctx, "b", []byte("two"))
	require.NoError(t, err)

	v, got, err := GetFromLeader(ctx, js, "test", "a")
	require.NoError(t, err)
	assert.Equal(t, "one", string(v))
	assert.Equal(t, rev, got)

	_, _, err = GetFromLeader(ctx, js, "test", "none")
	assert.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, kv.Delete(ctx, "a"))
	_, _, err = GetFromLeader(ctx, js, "test", "a")
	assert.ErrorIs(t, err, ErrNotFound, "deleted")
	require.NoError(t, kv.Purge(ctx, "b"))
	_, _, err = GetFromLeader(ctx, js, "test", "b")
	assert.ErrorIs(t, err, ErrNotFound, "purged")
	_, _, err = GetFromLeader(ctx, js, "absent", "a")
	assert.Error(t, err, "no such bucket")
	assert.NotErrorIs(t, err, ErrNotFound)
}
