package config

import (
	"flag"
	"io"
	"log/slog"
	"os"
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
	assert.Equal(t, 120*time.Second, c.FirstByteTimeout)
	assert.Zero(t, c.WholeAnswerTimeout, "a whole answer has the first-byte timeout unless told otherwise")
}

func TestWholeAnswerTimeout(t *testing.T) {
	c, err := Load("serve", []string{"--whole-answer-timeout", "15m"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 15*time.Minute, c.WholeAnswerTimeout)
	for _, bad := range []string{"0s", "-1m", "ten minutes"} {
		_, err := Load("serve", nil, env(map[string]string{"SWITCHBOARD_WHOLE_ANSWER_TIMEOUT": bad}), io.Discard)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "SWITCHBOARD_WHOLE_ANSWER_TIMEOUT (--whole-answer-timeout)", bad)
	}
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

// An HS256 secret shorter than the hash, which RFC 7518 forbids, would let
// anyone who guesses it sign in as any user: it is refused at start,
// without being echoed.
func TestJWTSecretIsAsLongAsTheHash(t *testing.T) {
	_, err := Load("serve", nil, env(map[string]string{"SWITCHBOARD_JWT_SECRET": "hunter2-hunter2-hunter2"}), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SWITCHBOARD_JWT_SECRET (--jwt-secret): must be at least 32 characters")
	assert.NotContains(t, err.Error(), "hunter2")
	_, err = Load("serve", nil, env(map[string]string{"SWITCHBOARD_JWT_SECRET": strings.Repeat("s", 32)}), io.Discard)
	require.NoError(t, err)
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

// A JWKS URL alone would accept tokens the identity provider issued for any
// other application: issuer and audience are required with it.
func TestJWKSNeedsIssuerAndAudience(t *testing.T) {
	tests := []struct {
		name     string
		vars     map[string]string
		wantErrs []string
	}{
		{"jwks alone", map[string]string{"SWITCHBOARD_JWKS_URL": "https://idp.example/jwks"},
			[]string{"SWITCHBOARD_JWKS_URL", "SWITCHBOARD_JWT_ISSUER", "SWITCHBOARD_JWT_AUDIENCE"}},
		{"jwks without audience", map[string]string{"SWITCHBOARD_JWKS_URL": "https://idp.example/jwks", "SWITCHBOARD_JWT_ISSUER": "https://idp.example/"},
			[]string{"SWITCHBOARD_JWT_AUDIENCE"}},
		{"jwks without issuer", map[string]string{"SWITCHBOARD_JWKS_URL": "https://idp.example/jwks", "SWITCHBOARD_JWT_AUDIENCE": "switchboard"},
			[]string{"SWITCHBOARD_JWT_ISSUER"}},
		{"jwks with both", map[string]string{"SWITCHBOARD_JWKS_URL": "https://idp.example/jwks", "SWITCHBOARD_JWT_ISSUER": "https://idp.example/", "SWITCHBOARD_JWT_AUDIENCE": "switchboard"}, nil},
		{"secret without either", map[string]string{"SWITCHBOARD_JWT_SECRET": "0123456789abcdef0123456789abcdef"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("serve", nil, env(tt.vars), io.Discard)
			if tt.wantErrs == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.vars["SWITCHBOARD_JWT_ISSUER"], c.JWTIssuer)
				assert.Equal(t, tt.vars["SWITCHBOARD_JWT_AUDIENCE"], c.JWTAudience)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErrs {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestGRPCTLSSettings(t *testing.T) {
	dir := t.TempDir()
	pem := dir + "/cert.pem"
	require.NoError(t, os.WriteFile(pem, []byte("x"), 0o600))
	tests := []struct {
		name    string
		vars    map[string]string
		wantErr string
	}{
		{"cert without key", map[string]string{"SWITCHBOARD_GRPC_TLS_CERT": pem}, "SWITCHBOARD_GRPC_TLS_CERT"},
		{"client CA without a TLS listener", map[string]string{"SWITCHBOARD_GRPC_CLIENT_CA": pem}, "SWITCHBOARD_GRPC_CLIENT_CA"},
		{"missing file", map[string]string{"SWITCHBOARD_GRPC_TLS_CA": dir + "/nope.pem"}, "SWITCHBOARD_GRPC_TLS_CA"},
		{"short internal token", map[string]string{"SWITCHBOARD_INTERNAL_TOKEN": "short"}, "SWITCHBOARD_INTERNAL_TOKEN"},
		{"complete", map[string]string{"SWITCHBOARD_GRPC_TLS_CERT": pem, "SWITCHBOARD_GRPC_TLS_KEY": pem, "SWITCHBOARD_GRPC_CLIENT_CA": pem, "SWITCHBOARD_GRPC_TLS_CA": pem}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("serve", nil, env(tt.vars), io.Discard)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, pem, c.GRPCClientCA)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), "short\"", "the secret is not echoed")
		})
	}
}

func TestCORSOriginsAndBodyLimits(t *testing.T) {
	c, err := Load("serve", nil, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Empty(t, c.CORSOrigins, "no browser origin is allowed by default")
	assert.Equal(t, int64(32<<20), c.MaxBodyBytes)

	c, err = Load("serve", nil, env(map[string]string{
		"SWITCHBOARD_CORS_ORIGINS":  " https://App.example , http://localhost:3000/ ",
		"SWITCHBOARD_MIN_BODY_RATE": "2048",
	}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"https://app.example", "http://localhost:3000"}, c.CORSOrigins)
	assert.Equal(t, int64(2048), c.MinBodyRate)

	for _, bad := range []map[string]string{
		{"SWITCHBOARD_CORS_ORIGINS": "*"},
		{"SWITCHBOARD_CORS_ORIGINS": "https://app.example/path"},
		{"SWITCHBOARD_CORS_ORIGINS": "app.example"},
		{"SWITCHBOARD_MAX_BODY_BYTES": "0"},
		{"SWITCHBOARD_BODY_MEMORY_BYTES": "1000", "SWITCHBOARD_MAX_BODY_BYTES": "1000"},
	} {
		_, err := Load("serve", nil, env(bad), io.Discard)
		assert.Error(t, err, "%v", bad)
	}
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

// Each flag's help names one default: the value its environment variable
// gave, else the built-in one, which some flags describe in words.
func TestHelpNamesOneDefault(t *testing.T) {
	help := func(e map[string]string) string {
		var out strings.Builder
		_, err := Load("serve", []string{"-h"}, env(e), &out)
		require.ErrorIs(t, err, flag.ErrHelp)
		return out.String()
	}
	line := func(help, name string) string {
		_, after, ok := strings.Cut(help, "-"+name+" value\n")
		require.True(t, ok, help)
		l, _, _ := strings.Cut(after, "\n")
		return l
	}
	h := help(nil)
	for _, l := range strings.Split(h, "\n") {
		assert.LessOrEqual(t, strings.Count(l, "default"), 1, "%q", l)
	}
	assert.NotContains(t, h, `(default "")`)
	assert.Contains(t, line(h, "core-addr"), "(default: the gRPC listener)")
	assert.Contains(t, line(h, "http-addr"), `(default "127.0.0.1:8080")`)

	h = help(map[string]string{"SWITCHBOARD_CORE_ADDR": "core:9090", "SWITCHBOARD_ADMIN_TOKEN": "0123456789abcdef0123"})
	for _, l := range strings.Split(h, "\n") {
		assert.LessOrEqual(t, strings.Count(l, "default"), 1, "%q", l)
	}
	assert.Contains(t, line(h, "core-addr"), `(default "core:9090")`, "the value the environment gave")
	assert.Contains(t, line(h, "admin-token"), `(default "(set)")`, "a secret is not shown")
	assert.NotContains(t, h, "0123456789abcdef0123")
}
