package spine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The embedded server (one process, the default deployment) acknowledges a
// publish only once it is fsynced: a Stripe event answered 2xx, a queued
// job or a usage record survives the host losing power right after the
// ack. nats-server's default syncs the store every two minutes. A power
// loss cannot be staged in a test, so the running server's JetStream
// configuration is read, as started and after JetStream is started again
// once a full disk has room.
func TestEmbeddedStoreSyncsEveryAcknowledgedWrite(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	cfg := e.srv.JetStreamConfig()
	require.NotNil(t, cfg)
	require.True(t, cfg.SyncAlways, "JetStream acknowledges writes it has not fsynced (sync interval %v)", cfg.SyncInterval)

	require.NoError(t, e.restartJetStream())
	cfg = e.srv.JetStreamConfig()
	require.NotNil(t, cfg)
	require.True(t, cfg.SyncAlways, "after a restart JetStream acknowledges writes it has not fsynced")
}
