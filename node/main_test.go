package node_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops what it started: after the package's tests no goroutine
// of a process, connection, server or load is left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
