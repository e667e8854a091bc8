package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every invalid value is in the one list start-up prints, the variables
// without a flag (the memory limit, the trace exporter, the debug address)
// with the rest, and the process exits 2 before anything starts.
func TestInvalidValuesAllReportedAtStart(t *testing.T) {
	restoreMemory(t)
	var stderr bytes.Buffer
	rc := run([]string{"serve"}, env(map[string]string{
		"SWITCHBOARD_NATS_REPLICAS":    "7",
		"SWITCHBOARD_LOG_LEVEL":        "chatty",
		memoryLimitEnv:                 "2",
		"OTEL_TRACES_EXPORTER":         "zipkin",
		"OTEL_EXPORTER_OTLP_PROTOCOL":  "grpc",
		debugAddrEnv:                   "0.0.0.0:6060",
		"SWITCHBOARD_SHUTDOWN_TIMEOUT": "soon",
	}), io.Discard, &stderr)
	assert.Equal(t, 2, rc)
	msg := stderr.String()
	for _, want := range []string{"SWITCHBOARD_NATS_REPLICAS", "SWITCHBOARD_LOG_LEVEL", memoryLimitEnv, `OTEL_TRACES_EXPORTER="zipkin"`,
		`protocol "grpc"`, debugAddrEnv, "SWITCHBOARD_SHUTDOWN_TIMEOUT"} {
		assert.Contains(t, msg, want)
	}
	assert.Equal(t, 1, strings.Count(msg, "invalid configuration"), "one list:\n%s", msg)
}

// Each flag's help names one default: the value an environment variable
// gave, else the built-in one.
func TestTokenHelpNamesOneDefault(t *testing.T) {
	for _, e := range []map[string]string{nil, {"SWITCHBOARD_JWT_ISSUER": "https://id.example.com"}} {
		var stderr bytes.Buffer
		assert.Equal(t, 0, run([]string{"token", "-h"}, env(e), io.Discard, &stderr))
		for _, line := range strings.Split(stderr.String(), "\n") {
			assert.LessOrEqual(t, strings.Count(line, "default"), 1, "%q", line)
		}
	}
}

// switchboard -h (or --help, -help, help) lists the commands, as the usage
// it prints says; a command's own -h lists that command's flags.
func TestHelpListsTheCommands(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help", "help"} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 0, run([]string{arg}, env(nil), &stdout, &stderr), arg)
		for _, command := range []string{"serve", "core", "billing", "edge", "worker", "token", "login", "version"} {
			assert.Contains(t, stdout.String(), "\n  "+command+" ", "%s: %s", arg, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run([]string{"serve", "-h"}, env(nil), &stdout, &stderr))
	assert.Contains(t, stderr.String(), "-http-addr")
}

// switchboard token refuses a secret serve would refuse at start: the
// tokens it signed would be checked by no gateway.
func TestTokenRefusesAShortSecret(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"token", "--user", "u1", "--email", "u1@example.com", "--jwt-secret", "short"}, env(nil), &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout.String(), "no token")
	assert.Contains(t, stderr.String(), "at least 32 characters")
	assert.NotContains(t, stderr.String(), "short", "the secret is not echoed")
}
