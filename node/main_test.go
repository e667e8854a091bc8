package node_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops what it started: after the package's tests no goroutine
// of a process, connection, server or load is left running. But for one
// file store: a NATS server stopped while it was still making a stream (a
// cluster node killed under load, on a busy machine) leaves that stream's
// store unstopped, with its flush loop and the access-time ticker every
// store keeps going; the server and everything else of it are gone (seen
// once in a CI run).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"))
}
