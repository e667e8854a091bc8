package config

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	c, err := Load("serve", nil, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	assert.Equal(t, "127.0.0.1:9090", c.GRPCAddr)
	assert.Equal(t, "./data", c.DataDir)
	assert.Equal(t, c.GRPCAddr, c.CoreAddr, "core is reached at the gRPC listener by default")
	assert.Equal(t, c.GRPCAddr, c.BillingAddr)
	assert.Equal(t, "http://127.0.0.1:8080", c.PublicURL)
	assert.False(t, c.RequireAPIKey)
	assert.Equal(t, slog.LevelInfo, c.LogLevel)
	assert.Equal(t, 15*time.Second, c.ShutdownTimeout)
	assert.Equal(t, 1, c.NATSReplica)
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	c, err := Load("serve", []string{"--http-addr", "0.0.0.0:9000", "-require-api-key=true"},
		env(map[string]string{"SWITCHBOARD_HTTP_ADDR": "127.0.0.1:1", "REQUIRE_API_KEY": "false", "SWITCHBOARD_DATA_DIR": "/var/lib/sb"}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:9000", c.HTTPAddr)
	assert.True(t, c.RequireAPIKey)
	assert.Equal(t, "/var/lib/sb", c.DataDir, "the environment applies where no flag is given")
}

// Every problem is reported in one run, each naming its variable and flag,
// and secrets are never echoed.
func TestAllProblemsAtOnce(t *testing.T) {
	_, err := Load("serve", nil, env(map[string]string{
		"SWITCHBOARD_HTTP_ADDR":     "localhost",
		"SWITCHBOARD_GRPC_ADDR":     "127.0.0.1:99999",
		"SWITCHBOARD_NATS_URL":      "http://nats:4222",
		"SWITCHBOARD_SECRET_KEY":    "not-a-key-but-a-secret",
		"REQUIRE_API_KEY":           "sometimes",
		"SWITCHBOARD_PUBLIC_URL":    "example.com",
		"SWITCHBOARD_LOG_LEVEL":     "chatty",
		"SWITCHBOARD_NATS_REPLICAS": "7",
		"SWITCHBOARD_ADMIN_TOKEN":   "short",
	}), io.Discard)
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		"SWITCHBOARD_HTTP_ADDR (--http-addr)", "SWITCHBOARD_GRPC_ADDR", "SWITCHBOARD_NATS_URL", "SWITCHBOARD_SECRET_KEY",
		"REQUIRE_API_KEY", "SWITCHBOARD_PUBLIC_URL", "SWITCHBOARD_LOG_LEVEL", "SWITCHBOARD_NATS_REPLICAS", "SWITCHBOARD_ADMIN_TOKEN",
	} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, "not-a-key-but-a-secret")
	assert.Equal(t, 9, strings.Count(msg, "\n")+1, "one line per problem:\n%s", msg)
}

func TestSplitRolesNeedExternalNATS(t *testing.T) {
	for _, cmd := range []string{"core", "worker"} {
		_, err := Load(cmd, nil, env(nil), io.Discard)
		require.Error(t, err, cmd)
		assert.Contains(t, err.Error(), "SWITCHBOARD_NATS_URL")
		_, err = Load(cmd, nil, env(map[string]string{"SWITCHBOARD_NATS_URL": "nats://a:4222,nats://b:4222"}), io.Discard)
		require.NoError(t, err, cmd)
	}
	_, err := Load("edge", nil, env(nil), io.Discard)
	require.NoError(t, err, "the edge talks to core over gRPC only")
}

func TestUnexpectedArguments(t *testing.T) {
	_, err := Load("serve", []string{"extra"}, env(nil), io.Discard)
	require.Error(t, err)
}

// Edge and workers may be given several core (and billing) replicas.
func TestAddressLists(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []string
		bad         bool
	}{
		{name: "one", value: "10.0.0.1:9090", want: []string{"10.0.0.1:9090"}},
		{name: "list", value: "10.0.0.1:9090, 10.0.0.2:9090,core-3:9090", want: []string{"10.0.0.1:9090", "10.0.0.2:9090", "core-3:9090"}},
		{name: "dns name", value: "core.switchboard.svc:9090", want: []string{"core.switchboard.svc:9090"}},
		{name: "missing port in list", value: "10.0.0.1:9090,10.0.0.2", bad: true},
		{name: "bad port", value: "10.0.0.1:90900", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("edge", nil, env(map[string]string{"SWITCHBOARD_CORE_ADDR": tc.value, "SWITCHBOARD_BILLING_ADDR": tc.value}), io.Discard)
			if tc.bad {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "SWITCHBOARD_CORE_ADDR")
				assert.Contains(t, err.Error(), "SWITCHBOARD_BILLING_ADDR")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, Addrs(c.CoreAddr))
			assert.Equal(t, tc.want, Addrs(c.BillingAddr))
		})
	}
}
