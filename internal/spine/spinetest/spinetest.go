// Package spinetest gives tests what the spine's users need of NATS: an
// embedded server with JetStream on, gone when the test ends.
package spinetest

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/spine"
)

// JetStream starts an embedded NATS server (JetStream on, its store in a
// temporary directory of t) and returns JetStream on a connection to it;
// the server and the connection stop when t ends.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	e, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	nc, err := e.Connect("test", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// Bucket creates, on an embedded NATS server of its own (JetStream), the
// key-value bucket named name as cfgs (a topology's buckets) define it, and
// returns it.
func Bucket(t testing.TB, name string, cfgs []jetstream.KeyValueConfig) jetstream.KeyValue {
	t.Helper()
	i := slices.IndexFunc(cfgs, func(c jetstream.KeyValueConfig) bool { return c.Bucket == name })
	require.GreaterOrEqual(t, i, 0, "no bucket %s in the topology", name)
	kv, err := JetStream(t).CreateKeyValue(context.Background(), cfgs[i])
	require.NoError(t, err)
	return kv
}
