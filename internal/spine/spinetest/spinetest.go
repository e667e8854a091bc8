// Package spinetest gives tests what the spine's users need of NATS: an
// embedded server with JetStream on, gone when the test ends.
package spinetest

import (
	"log/slog"
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
