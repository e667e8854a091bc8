// Package config reads the process configuration: environment variables, each
// mirrored by a command-line flag (a flag wins), validated all at once so an
// operator sees every problem in one run.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/secrets"
)

// Config is the configuration of one switchboard process.
type Config struct {
	HTTPAddr    string
	GRPCAddr    string
	DataDir     string
	NATSURL     string
	NATSReplica int
	CoreAddr    string
	BillingAddr string
	AdminToken  string
	SecretKey   string
	// InternalToken (SWITCHBOARD_INTERNAL_TOKEN) is the service credential
	// every gRPC call between roles carries; `serve` generates one into the
	// data directory when it is empty.
	InternalToken string

	// GRPCTLSCert and GRPCTLSKey are this process's gRPC certificate and key
	// (served by the listener, presented as client certificate when
	// dialing with TLS); GRPCClientCA makes the listener require client
	// certificates; GRPCTLSCA makes dialers use TLS with these roots.
	GRPCTLSCert  string
	GRPCTLSKey   string
	GRPCClientCA string
	GRPCTLSCA    string

	RequireAPIKey bool
	// CORSOrigins are the browser origins (scheme://host[:port]) whose pages
	// may call the gateway routes without an API key
	// (SWITCHBOARD_CORS_ORIGINS, comma separated; default none). A keyed
	// request is served from any origin.
	CORSOrigins []string
	// MaxBodyBytes caps a JSON request body (zero: the edge's default).
	MaxBodyBytes int64
	// BodyMemoryBytes bounds the request body bytes the edge holds in memory
	// at once, across all requests (zero: the edge's default).
	BodyMemoryBytes int64
	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second after a grace period (zero: the edge's default).
	MinBodyRate int64
	// BodyGrace is how long a body may take before MinBodyRate applies,
	// and the longest pause within it (zero: the edge's default, 10 s).
	// Tests set it; it has no environment variable.
	BodyGrace time.Duration

	JWTSecret string
	JWKSURL   string
	// JWTIssuer and JWTAudience, when set, are required of user tokens
	// (both are required with a JWKS URL).
	JWTIssuer   string
	JWTAudience string

	StripeSecretKey     string
	StripeWebhookSecret string
	StripeAPIBase       string

	PublicURL string

	// FirstByteTimeout bounds the wait for an upstream's response headers;
	// past it the next connection is tried.
	FirstByteTimeout time.Duration
	// WholeAnswerTimeout bounds it instead for a whole (non-streamed)
	// answer, whose headers come only once it is written (zero: the
	// first-byte timeout).
	WholeAnswerTimeout time.Duration
	// StallTimeout ends a started stream whose upstream went silent.
	StallTimeout time.Duration
	// KeepAliveEvery is how long a started stream relayed by the edge may be
	// silent before it sends an SSE keep-alive comment (zero: the edge's
	// default, 15 s). Tests set it; it has no environment variable.
	KeepAliveEvery time.Duration
	// CatalogScanEvery is how often live catalogs near expiry are refreshed.
	CatalogScanEvery time.Duration
	// TokenScanEvery is how often OAuth tokens near expiry are refreshed.
	TokenScanEvery time.Duration
	// JobTimeout bounds one worker job of any kind (zero: each kind's own
	// bound). A job its worker has not acknowledged 10 s past it is handed
	// to another worker.
	JobTimeout time.Duration
	// CLIHomeDir is the home directory whose ~/.claude/settings.json the
	// desktop CLI settings route edits (empty: the user's home directory).
	// Tests set it; it has no environment variable.
	CLIHomeDir string
	// MaxAudioBytes caps a transcription upload (zero: the roles' default,
	// 25 MiB).
	MaxAudioBytes int64
	// OAuth overrides the OAuth login table, read from the variables
	// SWITCHBOARD_OAUTH_<PROVIDER>_<FIELD> (internal/oauth.EnvName), e.g.
	// SWITCHBOARD_OAUTH_QWEN_TOKEN_URL or
	// SWITCHBOARD_OAUTH_GITHUB_COPILOT_CLIENT_ID.
	OAuth oauth.Overrides
	// UsageMaxBytes bounds the SB_USAGE stream on disk; past it the oldest
	// events go (they are kept 35 days at most anyway).
	UsageMaxBytes int64
	// UsageBufferEvents bounds the usage events a core process keeps while
	// NATS is away; past it new events are dropped and counted.
	UsageBufferEvents int
	// ResponsesMaxBytes bounds the stored Responses answers on disk; past it
	// the oldest go (they are kept 30 days at most anyway).
	ResponsesMaxBytes int64

	LogLevel        slog.Level
	LogFormat       string
	ShutdownTimeout time.Duration

	// MetricsAddr (SWITCHBOARD_METRICS_ADDR) is a private listener serving
	// GET /metrics without authentication; empty: none (the edge still
	// serves /metrics to the admin token).
	MetricsAddr string
}

// setting is one configuration value: its environment variable, flag and
// default, and where it lands once validated.
type setting struct {
	env, flag, def, usage string
	secret                bool
	raw                   string
}

// help is the setting's line in the flags' help: its usage, variable and
// one default, the value in effect before the flags (a secret's only as
// "(set)"), else the built-in default its usage describes in words
// ("(default: the gRPC listener)").
func (st *setting) help() string {
	usage, described, _ := strings.Cut(st.usage, " (default")
	switch {
	case st.secret && st.raw != "":
		return fmt.Sprintf("%s [$%s] (default %q)", usage, st.env, "(set)")
	case st.raw != "":
		return fmt.Sprintf("%s [$%s] (default %q)", usage, st.env, st.raw)
	case described != "":
		return fmt.Sprintf("%s [$%s] (default%s", usage, st.env, described)
	}
	return fmt.Sprintf("%s [$%s]", usage, st.env)
}

type settings struct {
	list []*setting
}

func (s *settings) add(env, flagName, def, usage string, secret bool) *setting {
	st := &setting{env: env, flag: flagName, def: def, usage: usage, secret: secret}
	s.list = append(s.list, st)
	return st
}

// MinJWTSecret is the shortest SWITCHBOARD_JWT_SECRET: HS256's 256 bits.
const MinJWTSecret = 32

// Load reads the configuration of the named command from args (the flags
// after the subcommand) and getenv. Every invalid value is reported in one
// joined error. flag.ErrHelp is returned as is when -h was asked.
func Load(command string, args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	var s settings
	httpAddr := s.add("SWITCHBOARD_HTTP_ADDR", "http-addr", "127.0.0.1:8080", "edge HTTP listen address", false)
	grpcAddr := s.add("SWITCHBOARD_GRPC_ADDR", "grpc-addr", "127.0.0.1:9090", "core and billing gRPC listen address", false)
	dataDir := s.add("SWITCHBOARD_DATA_DIR", "data-dir", "./data", "embedded NATS store and generated keys", false)
	natsURL := s.add("SWITCHBOARD_NATS_URL", "nats-url", "", "external NATS URL(s), comma separated; empty runs an embedded server", true)
	replicas := s.add("SWITCHBOARD_NATS_REPLICAS", "nats-replicas", "1", "replicas of streams and buckets (3 on a cluster)", false)
	coreAddr := s.add("SWITCHBOARD_CORE_ADDR", "core-addr", "", "where edge and workers reach core: host:port, a comma separated list of them, or a DNS name with several addresses; calls are balanced across the healthy ones (default: the gRPC listener)", false)
	billingAddr := s.add("SWITCHBOARD_BILLING_ADDR", "billing-addr", "", "where edge reaches billing, as for --core-addr (default: the gRPC listener)", false)
	adminToken := s.add("SWITCHBOARD_ADMIN_TOKEN", "admin-token", "", "admin bearer token (generated into the data directory when empty)", true)
	secretKey := s.add("SWITCHBOARD_SECRET_KEY", "secret-key", "", "base64 32-byte key for secrets at rest (generated when empty)", true)
	internalToken := s.add("SWITCHBOARD_INTERNAL_TOKEN", "internal-token", "", "service credential of gRPC calls between roles (generated into the data directory by serve; required by split billing and edge)", true)
	grpcCert := s.add("SWITCHBOARD_GRPC_TLS_CERT", "grpc-tls-cert", "", "PEM certificate of the gRPC listener (also the client certificate when dialing with TLS)", false)
	grpcKey := s.add("SWITCHBOARD_GRPC_TLS_KEY", "grpc-tls-key", "", "PEM key of SWITCHBOARD_GRPC_TLS_CERT", false)
	grpcClientCA := s.add("SWITCHBOARD_GRPC_CLIENT_CA", "grpc-client-ca", "", "PEM CA(s): the gRPC listener requires client certificates they signed", false)
	grpcCA := s.add("SWITCHBOARD_GRPC_TLS_CA", "grpc-tls-ca", "", "PEM CA(s): dial core and billing with TLS, verifying their certificates", false)
	corsOrigins := s.add("SWITCHBOARD_CORS_ORIGINS", "cors-origins", "", "browser origins allowed to call the gateway without an API key, comma separated (keyed requests are served from any origin)", false)
	maxBody := s.add("SWITCHBOARD_MAX_BODY_BYTES", "max-body-bytes", "33554432", "largest JSON request body, in bytes", false)
	bodyMemory := s.add("SWITCHBOARD_BODY_MEMORY_BYTES", "body-memory-bytes", "268435456", "request body bytes held in memory at once across all requests; past it requests wait briefly, then get 503", false)
	minRate := s.add("SWITCHBOARD_MIN_BODY_RATE", "min-body-rate", "1024", "slowest a request body may arrive, in bytes per second (after a 10s grace)", false)
	requireKey := s.add("REQUIRE_API_KEY", "require-api-key", "false", "gateway routes need an API key", false)
	jwtSecret := s.add("SWITCHBOARD_JWT_SECRET", "jwt-secret", "", "HS256 secret of GraphQL user tokens", true)
	jwksURL := s.add("SWITCHBOARD_JWKS_URL", "jwks-url", "", "JWKS URL of GraphQL user tokens", false)
	jwtIssuer := s.add("SWITCHBOARD_JWT_ISSUER", "jwt-issuer", "", "required iss of GraphQL user tokens (required with a JWKS URL)", false)
	jwtAudience := s.add("SWITCHBOARD_JWT_AUDIENCE", "jwt-audience", "", "required aud of GraphQL user tokens (required with a JWKS URL)", false)
	stripeKey := s.add("STRIPE_SECRET_KEY", "stripe-secret-key", "", "Stripe secret key; billing is off without it", true)
	stripeHook := s.add("STRIPE_WEBHOOK_SECRET", "stripe-webhook-secret", "", "Stripe webhook signing secret", true)
	stripeBase := s.add("STRIPE_API_BASE", "stripe-api-base", "", "Stripe API base URL (for stripe-mock or a proxy)", false)
	publicURL := s.add("SWITCHBOARD_PUBLIC_URL", "public-url", "", "public base URL for checkout and portal return links (default http://<http-addr>)", false)
	metricsAddr := s.add("SWITCHBOARD_METRICS_ADDR", "metrics-addr", "", "private listener serving GET /metrics without authentication (default: none)", false)
	logLevel := s.add("SWITCHBOARD_LOG_LEVEL", "log-level", "info", "debug, info, warn or error", false)
	logFormat := s.add("SWITCHBOARD_LOG_FORMAT", "log-format", "text", "text or json", false)
	firstByte := s.add("SWITCHBOARD_FIRST_BYTE_TIMEOUT", "first-byte-timeout", "120s", "how long an upstream may take to start answering before the next connection is tried (a whole answer's headers: see --whole-answer-timeout)", false)
	wholeAnswer := s.add("SWITCHBOARD_WHOLE_ANSWER_TIMEOUT", "whole-answer-timeout", "", "how long an upstream may take to write a whole (non-streamed) answer, which it starts sending only once written, before the next connection is tried (default: the first-byte timeout)", false)
	stall := s.add("SWITCHBOARD_STALL_TIMEOUT", "stall-timeout", "60s", "how long a started stream may stay silent before it ends with an error", false)
	catalogScan := s.add("SWITCHBOARD_CATALOG_SCAN_INTERVAL", "catalog-scan-interval", "1m", "how often live model catalogs near their one-hour expiry are fetched again", false)
	tokenScan := s.add("SWITCHBOARD_TOKEN_SCAN_INTERVAL", "token-scan-interval", "1m", "how often OAuth connections are checked for tokens within their provider's refresh lead time", false)
	jobTimeout := s.add("SWITCHBOARD_JOB_TIMEOUT", "job-timeout", "", "bound on one worker job; a job not acknowledged 10s past it goes to another worker (default: each kind's own, 80s for token refresh)", false)
	maxAudio := s.add("SWITCHBOARD_MAX_AUDIO_BYTES", "max-audio-bytes", "26214400", "largest audio file /v1/audio/transcriptions accepts, in bytes", false)
	usageMaxBytes := s.add("SWITCHBOARD_USAGE_MAX_BYTES", "usage-max-bytes", "1073741824", "bound on the SB_USAGE stream on disk, in bytes (the oldest events go past it)", false)
	usageBuffer := s.add("SWITCHBOARD_USAGE_BUFFER_EVENTS", "usage-buffer-events", "100000", "usage events core keeps while NATS is away (also bounded to 64 MiB); past it new events are dropped and counted", false)
	responsesMaxBytes := s.add("SWITCHBOARD_RESPONSES_MAX_BYTES", "responses-max-bytes", "268435456", "bound on the stored Responses answers (previous_response_id, GET /v1/responses/{id}) on disk, in bytes (the oldest go past it)", false)
	shutdown := s.add("SWITCHBOARD_SHUTDOWN_TIMEOUT", "shutdown-timeout", "15s", "how long a graceful shutdown drains in-flight requests", false)

	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(usage)
	for _, st := range s.list {
		st.raw = st.def
		if v, ok := lookup(getenv, st.env); ok {
			st.raw = v
		}
		fs.Func(st.flag, st.help(), func(v string) error {
			st.raw = v
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}

	var errs []error
	c := Config{
		HTTPAddr:            httpAddr.raw,
		GRPCAddr:            grpcAddr.raw,
		DataDir:             dataDir.raw,
		NATSURL:             natsURL.raw,
		CoreAddr:            coreAddr.raw,
		BillingAddr:         billingAddr.raw,
		AdminToken:          adminToken.raw,
		SecretKey:           secretKey.raw,
		InternalToken:       internalToken.raw,
		GRPCTLSCert:         grpcCert.raw,
		GRPCTLSKey:          grpcKey.raw,
		GRPCClientCA:        grpcClientCA.raw,
		GRPCTLSCA:           grpcCA.raw,
		JWTIssuer:           jwtIssuer.raw,
		JWTAudience:         jwtAudience.raw,
		JWTSecret:           jwtSecret.raw,
		JWKSURL:             jwksURL.raw,
		StripeSecretKey:     stripeKey.raw,
		StripeWebhookSecret: stripeHook.raw,
		StripeAPIBase:       stripeBase.raw,
		PublicURL:           publicURL.raw,
		LogFormat:           logFormat.raw,
		MetricsAddr:         metricsAddr.raw,
	}
	check := func(st *setting, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (--%s): %w", st.env, st.flag, err))
		}
	}
	check(httpAddr, validAddr(c.HTTPAddr))
	if c.MetricsAddr != "" {
		check(metricsAddr, validAddr(c.MetricsAddr))
	}
	check(grpcAddr, validAddr(c.GRPCAddr))
	if c.CoreAddr != "" {
		check(coreAddr, validAddrList(c.CoreAddr))
	}
	if c.BillingAddr != "" {
		check(billingAddr, validAddrList(c.BillingAddr))
	}
	if c.DataDir == "" {
		check(dataDir, errors.New("must not be empty"))
	}
	check(natsURL, validNATSURL(c.NATSURL))
	n, err := strconv.Atoi(replicas.raw)
	if err == nil && (n < 1 || n > 5) {
		err = errors.New("must be between 1 and 5")
	}
	c.NATSReplica = n
	check(replicas, err)
	if c.SecretKey != "" {
		_, err := secrets.ParseKey(c.SecretKey)
		check(secretKey, err)
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		check(adminToken, errors.New("must be at least 16 characters"))
	}
	if c.InternalToken != "" && len(c.InternalToken) < 16 {
		check(internalToken, errors.New("must be at least 16 characters"))
	}
	// RFC 7518 (3.2): an HS256 key is at least as long as the hash, 256
	// bits; a shorter one can be guessed, and with it any user's token made.
	if c.JWTSecret != "" && len(c.JWTSecret) < MinJWTSecret {
		check(jwtSecret, errors.New("must be at least "+strconv.Itoa(MinJWTSecret)+" characters (an HS256 key is at least 256 bits)"))
	}
	if (c.GRPCTLSCert == "") != (c.GRPCTLSKey == "") {
		check(grpcCert, errors.New("SWITCHBOARD_GRPC_TLS_CERT and SWITCHBOARD_GRPC_TLS_KEY go together"))
	}
	if c.GRPCClientCA != "" && c.GRPCTLSCert == "" {
		check(grpcClientCA, errors.New("client certificates are verified only by a TLS listener: set SWITCHBOARD_GRPC_TLS_CERT and SWITCHBOARD_GRPC_TLS_KEY"))
	}
	for _, f := range []*setting{grpcCert, grpcKey, grpcClientCA, grpcCA} {
		if f.raw != "" {
			check(f, readableFile(f.raw))
		}
	}
	c.RequireAPIKey, err = strconv.ParseBool(requireKey.raw)
	check(requireKey, err)
	c.CORSOrigins, err = parseOrigins(corsOrigins.raw)
	check(corsOrigins, err)
	for _, b := range []struct {
		st  *setting
		dst *int64
	}{{maxBody, &c.MaxBodyBytes}, {bodyMemory, &c.BodyMemoryBytes}, {minRate, &c.MinBodyRate}} {
		*b.dst, err = strconv.ParseInt(b.st.raw, 10, 64)
		if err == nil && *b.dst <= 0 {
			err = errors.New("must be a positive number")
		}
		check(b.st, err)
	}
	if c.BodyMemoryBytes > 0 && c.MaxBodyBytes > c.BodyMemoryBytes*3/4 {
		check(bodyMemory, errors.New("must be at least 4/3 of SWITCHBOARD_MAX_BODY_BYTES (a quarter is kept for small bodies)"))
	}
	if c.JWKSURL != "" {
		check(jwksURL, validHTTPURL(c.JWKSURL))
		// A shared identity provider signs tokens for other applications
		// with the same keys: only iss and aud say a token is for us.
		if c.JWTIssuer == "" || c.JWTAudience == "" {
			check(jwksURL, errors.New("needs SWITCHBOARD_JWT_ISSUER and SWITCHBOARD_JWT_AUDIENCE, so that tokens the identity provider issued for other applications are refused"))
		}
	}
	if c.StripeAPIBase != "" {
		check(stripeBase, validHTTPURL(c.StripeAPIBase))
	}
	if c.PublicURL != "" {
		check(publicURL, validHTTPURL(c.PublicURL))
	} else {
		c.PublicURL = "http://" + c.HTTPAddr
	}
	check(logLevel, c.LogLevel.UnmarshalText([]byte(logLevel.raw)))
	if c.LogFormat != "text" && c.LogFormat != "json" {
		check(logFormat, errors.New(`must be "text" or "json"`))
	}
	c.FirstByteTimeout, err = time.ParseDuration(firstByte.raw)
	if err == nil && c.FirstByteTimeout <= 0 {
		err = errors.New("must be positive")
	}
	check(firstByte, err)
	if wholeAnswer.raw != "" {
		c.WholeAnswerTimeout, err = time.ParseDuration(wholeAnswer.raw)
		if err == nil && c.WholeAnswerTimeout <= 0 {
			err = errors.New("must be positive")
		}
		check(wholeAnswer, err)
	}
	c.StallTimeout, err = time.ParseDuration(stall.raw)
	if err == nil && c.StallTimeout <= 0 {
		err = errors.New("must be positive")
	}
	check(stall, err)
	c.CatalogScanEvery, err = time.ParseDuration(catalogScan.raw)
	if err == nil && c.CatalogScanEvery <= 0 {
		err = errors.New("must be positive")
	}
	check(catalogScan, err)
	c.TokenScanEvery, err = time.ParseDuration(tokenScan.raw)
	if err == nil && c.TokenScanEvery <= 0 {
		err = errors.New("must be positive")
	}
	check(tokenScan, err)
	if jobTimeout.raw != "" {
		c.JobTimeout, err = time.ParseDuration(jobTimeout.raw)
		if err == nil && c.JobTimeout <= 0 {
			err = errors.New("must be positive")
		}
		check(jobTimeout, err)
	}
	c.MaxAudioBytes, err = strconv.ParseInt(maxAudio.raw, 10, 64)
	if err == nil && c.MaxAudioBytes <= 0 {
		err = errors.New("must be a positive number of bytes")
	}
	check(maxAudio, err)
	c.UsageMaxBytes, err = strconv.ParseInt(usageMaxBytes.raw, 10, 64)
	if err == nil && c.UsageMaxBytes < 1<<20 {
		err = errors.New("must be at least 1048576 bytes")
	}
	check(usageMaxBytes, err)
	c.UsageBufferEvents, err = strconv.Atoi(usageBuffer.raw)
	if err == nil && c.UsageBufferEvents <= 0 {
		err = errors.New("must be a positive number of events")
	}
	check(usageBuffer, err)
	c.ResponsesMaxBytes, err = strconv.ParseInt(responsesMaxBytes.raw, 10, 64)
	if err == nil && c.ResponsesMaxBytes < 1<<20 {
		err = errors.New("must be at least 1048576 bytes")
	}
	check(responsesMaxBytes, err)
	c.ShutdownTimeout, err = time.ParseDuration(shutdown.raw)
	if err == nil && c.ShutdownTimeout <= 0 {
		err = errors.New("must be positive")
	}
	check(shutdown, err)
	c.OAuth = oauth.OverridesFromEnv(getenv)
	if _, err := oauth.NewProviders(c.OAuth); err != nil {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_OAUTH_*: %w", err))
	}

	switch command {
	case "core", "worker", "billing":
		if c.NATSURL == "" {
			errs = append(errs, fmt.Errorf("SWITCHBOARD_NATS_URL (--nats-url): the %s role runs against an external NATS server and needs its URL", command))
		}
	}
	if c.CoreAddr == "" {
		c.CoreAddr = c.GRPCAddr
	}
	if c.BillingAddr == "" {
		c.BillingAddr = c.GRPCAddr
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// parseOrigins reads a comma-separated list of origins, each
// scheme://host[:port] with no path, as browsers send them in Origin.
func parseOrigins(list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("%q is not an origin (scheme://host[:port])", o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}

func lookup(getenv func(string) string, key string) (string, bool) {
	v := getenv(key)
	return v, v != ""
}

func validAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not a host:port address: %q", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("bad host in %q", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("bad port in %q", addr)
	}
	return nil
}

func readableFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("cannot read %q", name)
	}
	return f.Close()
}

func validAddrList(list string) error {
	for _, addr := range strings.Split(list, ",") {
		if err := validAddr(strings.TrimSpace(addr)); err != nil {
			return err
		}
	}
	return nil
}

// Addrs splits an address list (SWITCHBOARD_CORE_ADDR,
// SWITCHBOARD_BILLING_ADDR) into its host:port addresses.
func Addrs(list string) []string {
	var out []string
	for _, addr := range strings.Split(list, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			out = append(out, addr)
		}
	}
	return out
}

func validNATSURL(list string) error {
	if list == "" {
		return nil
	}
	for _, raw := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Host == "" {
			return errors.New("not a list of nats:// URLs")
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("unsupported scheme %q", u.Scheme)
		}
	}
	return nil
}

func validHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("not an http(s) URL: %q", raw)
	}
	return nil
}

// Logger builds the process logger from the configuration.
func (c Config) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
