// Package node assembles one switchboard process: the roles it runs, the NATS
// connection they share (an embedded server in one-process mode), and the
// gRPC server core listens on.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/switchboardhq/switchboard/billing"
	"github.com/switchboardhq/switchboard/core"
	"github.com/switchboardhq/switchboard/edge"
	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/inproc"
	"github.com/switchboardhq/switchboard/internal/rpcauth"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
	"github.com/switchboardhq/switchboard/workers"
)

// Role is one of the roles a process can run.
type Role string

const (
	RoleCore    Role = "core"
	RoleBilling Role = "billing"
	RoleEdge    Role = "edge"
	RoleWorker  Role = "worker"
)

// AllRoles is what `serve` runs.
var AllRoles = []Role{RoleCore, RoleBilling, RoleEdge, RoleWorker}

// Files generated into the data directory when not configured.
const (
	SecretKeyFile  = "secret.key"
	AdminTokenFile = "admin.token"
	// InternalTokenFile holds the service credential of calls between
	// roles (SWITCHBOARD_INTERNAL_TOKEN) that `serve` generates.
	InternalTokenFile = "internal.token"
	// JWTSecretFile holds the HS256 secret of GraphQL user tokens that
	// `serve` generates when no user-token configuration is given, so
	// `switchboard token` can mint development tokens.
	JWTSecretFile = "jwt.secret"
)

// Node is a started process.
type Node struct {
	cfg   config.Config
	log   *slog.Logger
	roles []Role

	embedded *spine.Embedded
	nc       *nats.Conn
	// lock is held on the data directory while the embedded store is open.
	lock *dirLock

	grpcServer *grpc.Server
	grpcLn     net.Listener
	memLn      *bufconn.Listener
	local      *inproc.Conn
	health     *health.Server
	conns      []*grpc.ClientConn
	// internalToken is the service credential this process's calls to
	// other roles carry and its gRPC server requires (rpcauth).
	internalToken string

	core    *core.Core
	billing *billing.Billing
	edge    *edge.Edge
	workers *workers.Workers

	// AdminTokenPath is where a generated admin token was written (empty
	// when the token came from the configuration).
	AdminTokenPath string

	// The process's metrics registry, tracing and private metrics
	// listener (telemetry.go).
	metrics   *prometheus.Registry
	tracing   *telemetry.Tracing
	metricsLn *telemetry.Listener
}

// Start brings up the given roles. With no external NATS URL it starts an
// embedded nats-server. On error everything already opened is closed.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger, roles ...Role) (*Node, error) {
	return StartWith(ctx, cfg, log, Options{}, roles...)
}

// StartWith is Start with options.
func StartWith(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options, roles ...Role) (n *Node, err error) {
	n = &Node{cfg: cfg, log: log, roles: roles}
	opened := n
	defer func() {
		if err != nil {
			// The returns below set n to nil; close what was opened.
			opened.close()
		}
	}()
	needs := func(r Role) bool { return slices.Contains(roles, r) }
	if err := n.startTelemetry(ctx, opts); err != nil {
		return nil, err
	}

	if needs(RoleCore) || needs(RoleWorker) || needs(RoleBilling) {
		if err := n.connectNATS(ctx); err != nil {
			return nil, err
		}
		n.observeNATS()
	}
	adminToken, err := n.adminToken(needs(RoleCore))
	if err != nil && (needs(RoleCore) || needs(RoleWorker)) {
		return nil, err
	}
	// Billing trusts the user the edge vouches for only from a caller
	// holding the internal token: both ends need it.
	n.internalToken, err = n.loadInternalToken(needs(RoleEdge) && needs(RoleBilling))
	if err != nil && (needs(RoleEdge) || needs(RoleBilling)) {
		return nil, err
	}

	if needs(RoleCore) {
		secretKey, err := n.secretKey()
		if err != nil {
			return nil, err
		}
		n.core, err = core.New(ctx, core.Config{
			AdminToken:         adminToken,
			SecretKey:          secretKey,
			RequireAPIKey:      cfg.RequireAPIKey,
			Replicas:           cfg.NATSReplica,
			Usage:              core.UsageConfig{MaxBytes: cfg.UsageMaxBytes, BufferEvents: cfg.UsageBufferEvents},
			ResponsesMaxBytes:  cfg.ResponsesMaxBytes,
			FirstByteTimeout:   cfg.FirstByteTimeout,
			WholeAnswerTimeout: cfg.WholeAnswerTimeout,
			MaxAudioBytes:      cfg.MaxAudioBytes,
			CatalogScanEvery:   cfg.CatalogScanEvery,
			TokenScanEvery:     cfg.TokenScanEvery,
			StallTimeout:       cfg.StallTimeout,
			OAuth:              cfg.OAuth,
		}, core.Deps{NATS: n.nc, Logger: log, Metrics: n.metrics, Tracing: n.tracing})
		if err != nil {
			return nil, err
		}
		if err := n.listenGRPC(); err != nil {
			return nil, err
		}
		n.core.Register(n.grpcServer)
		n.core.Register(n.local)
		n.health.SetServingStatus(corev1.Router_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		n.health.SetServingStatus(corev1.Admin_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	if needs(RoleBilling) {
		n.billing, err = billing.New(ctx, billing.Config{
			StripeSecretKey:     cfg.StripeSecretKey,
			StripeWebhookSecret: cfg.StripeWebhookSecret,
			StripeAPIBase:       cfg.StripeAPIBase,
			PublicURL:           cfg.PublicURL,
			Replicas:            cfg.NATSReplica,
		}, billing.Deps{NATS: n.nc, Logger: log, Metrics: n.metrics, Tracing: n.tracing})
		if err != nil {
			return nil, err
		}
		if err := n.listenGRPC(); err != nil {
			return nil, err
		}
		n.billing.Register(n.grpcServer)
		n.billing.Register(n.local)
		n.health.SetServingStatus(billingv1.Billing_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	if n.grpcServer != nil {
		reflection.Register(n.grpcServer)
	}

	var coreConn grpc.ClientConnInterface
	if needs(RoleEdge) || needs(RoleWorker) {
		coreConn, err = n.dial(cfg.CoreAddr, corev1.Router_ServiceDesc.ServiceName, needs(RoleCore))
		if err != nil {
			return nil, err
		}
	}
	if needs(RoleWorker) {
		// Workers call core's Admin API, which authorizes with the admin
		// token; their connection also carries the internal token, but it
		// does not replace the admin token: that would make every holder
		// of the internal token (the edge, billing) an administrator.
		n.workers, err = workers.New(ctx, workers.Config{AdminToken: adminToken, Replicas: cfg.NATSReplica, JobTimeout: cfg.JobTimeout, UsageMaxBytes: cfg.UsageMaxBytes, OAuth: cfg.OAuth},
			workers.Deps{NATS: n.nc, Core: coreConn, Logger: log, Metrics: n.metrics})
		if err != nil {
			return nil, err
		}
	}
	if needs(RoleEdge) {
		// An edge without a billing address (only when built without the
		// configuration's defaults) serves no billing routes.
		var billingConn grpc.ClientConnInterface
		if needs(RoleBilling) || cfg.BillingAddr != "" {
			c, err := n.dial(cfg.BillingAddr, billingv1.Billing_ServiceDesc.ServiceName, needs(RoleBilling))
			if err != nil {
				return nil, err
			}
			billingConn = c
		}
		jwtSecret, err := n.jwtSecret(needs(RoleBilling))
		if err != nil {
			return nil, err
		}
		n.edge, err = edge.New(ctx, edge.Config{
			HTTPAddr:        cfg.HTTPAddr,
			ShutdownTimeout: cfg.ShutdownTimeout,
			MaxAudioBytes:   cfg.MaxAudioBytes,
			PublicURL:       cfg.PublicURL,
			CLIHomeDir:      cfg.CLIHomeDir,
			KeepAliveEvery:  cfg.KeepAliveEvery,
			CORSOrigins:     cfg.CORSOrigins,
			RequireAPIKey:   cfg.RequireAPIKey,
			MaxBodyBytes:    cfg.MaxBodyBytes,
			BodyMemoryBytes: cfg.BodyMemoryBytes,
			MinBodyRate:     cfg.MinBodyRate,
			BodyGrace:       cfg.BodyGrace,
			Billing: edge.BillingConfig{JWTSecret: jwtSecret, JWKSURL: cfg.JWKSURL, JWTIssuer: cfg.JWTIssuer, JWTAudience: cfg.JWTAudience,
				Dev: loopback(cfg.HTTPAddr)},
			AdminToken: adminToken,
		}, edge.Deps{Core: coreConn, Billing: billingConn, Logger: log, Metrics: n.metrics, Tracing: n.tracing})
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (n *Node) connectNATS(ctx context.Context) error {
	var err error
	if n.cfg.NATSURL != "" {
		n.nc, err = spine.Connect(ctx, n.cfg.NATSURL, "switchboard", n.log)
		return err
	}
	// One owner per data directory: a second process on the same store
	// would corrupt it.
	n.lock, err = lockDataDir(n.cfg.DataDir)
	if err != nil {
		return err
	}
	n.embedded, err = spine.StartEmbedded(spine.EmbeddedConfig{DataDir: n.cfg.DataDir, Logger: n.log})
	if err != nil {
		return err
	}
	n.nc, err = n.embedded.Connect("switchboard", n.log)
	if err != nil {
		return err
	}
	// After a full disk JetStream is restarted, and the pull requests of
	// the process's consumers died with it: a reconnection renews them at
	// once rather than after their missed heartbeats (half a minute).
	nc := n.nc
	n.embedded.OnStoreRestart(func() { _ = nc.ForceReconnect() })
	return nil
}

// adminToken is the configured token, else the one in the data directory,
// generated there when create is set.
func (n *Node) adminToken(create bool) (string, error) {
	tok, path, err := n.dataToken(tokenFile{
		configured: n.cfg.AdminToken, file: AdminTokenFile, what: "admin token",
		missing: "SWITCHBOARD_ADMIN_TOKEN is not set and no generated token is in the data directory",
		created: "generated an admin token",
	}, create)
	if err == nil && path != "" {
		n.AdminTokenPath = path
	}
	return tok, err
}

// loadInternalToken is the configured internal token, else the one in the
// data directory, generated there when create is set.
func (n *Node) loadInternalToken(create bool) (string, error) {
	tok, _, err := n.dataToken(tokenFile{
		configured: n.cfg.InternalToken, file: InternalTokenFile, what: "internal token",
		missing: "SWITCHBOARD_INTERNAL_TOKEN is not set and no generated token is in the data directory: " +
			"roles in separate processes need the same internal token (the edge vouches for users to billing with it)",
		created: "generated an internal token for calls between roles",
	}, create)
	return tok, err
}

// tokenFile describes a token that comes from the configuration, else from
// a file in the data directory (generated there when create is set).
type tokenFile struct {
	configured, file, what, missing, created string
}

// dataToken is t's configured value, else the one in the data directory,
// generated when create is set; path is the file it was read from or
// written to (empty when configured).
func (n *Node) dataToken(t tokenFile, create bool) (tok, path string, err error) {
	if t.configured != "" {
		return t.configured, "", nil
	}
	path = filepath.Join(n.cfg.DataDir, t.file)
	if !create {
		b, err := secrets.Load(path)
		if err != nil {
			return "", "", errors.New(t.missing)
		}
		return string(b), "", nil
	}
	b, created, err := secrets.LoadOrCreate(path, secrets.NewToken)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", t.what, err)
	}
	if created {
		n.log.Info(t.created, "file", path)
	}
	return string(b), path, nil
}

// tlsConfig is the process's gRPC TLS configuration.
func (n *Node) tlsConfig() rpcauth.TLSConfig {
	return rpcauth.TLSConfig{CertFile: n.cfg.GRPCTLSCert, KeyFile: n.cfg.GRPCTLSKey, ClientCAFile: n.cfg.GRPCClientCA, CAFile: n.cfg.GRPCTLSCA}
}

func (n *Node) secretKey() ([]byte, error) {
	text := []byte(n.cfg.SecretKey)
	if len(text) == 0 {
		path := filepath.Join(n.cfg.DataDir, SecretKeyFile)
		var created bool
		var err error
		text, created, err = secrets.LoadOrCreate(path, secrets.NewKeyText)
		if err != nil {
			return nil, fmt.Errorf("secret key: %w", err)
		}
		if created {
			n.log.Info("generated a secret key for secrets at rest", "file", path)
		}
	}
	return secrets.ParseKey(string(text))
}

// jwtSecret is the configured user-token secret; with neither a secret nor
// a JWKS URL configured, one process running everything uses (and creates)
// the secret in its data directory.
func (n *Node) jwtSecret(create bool) (string, error) {
	if n.cfg.JWTSecret != "" || n.cfg.JWKSURL != "" || !create {
		return n.cfg.JWTSecret, nil
	}
	path := filepath.Join(n.cfg.DataDir, JWTSecretFile)
	b, created, err := secrets.LoadOrCreate(path, secrets.NewKeyText)
	if err != nil {
		return "", fmt.Errorf("user token secret: %w", err)
	}
	if created {
		n.log.Info("generated a secret for GraphQL user tokens; mint one with `switchboard token`", "file", path)
	}
	return string(b), nil
}

// loopback reports whether an address listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (n *Node) listenGRPC() error {
	if n.grpcServer != nil {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("grpc listen: %w", err)
	}
	if tc := n.tlsConfig(); tc.ServerEnabled() {
		// Network connections only: the in-process listener stays plain.
		tlsLn, err := rpcauth.ListenTLS(ln, tc)
		if err != nil {
			_ = ln.Close()
			return err
		}
		ln = tlsLn
	}
	n.grpcLn = ln
	n.memLn = bufconn.Listen(1 << 20)
	// Every call passes the guard, on the network and in process alike:
	// the Router and Admin check their own callers (API keys, the admin
	// token) and health checks are open; anything else, reflection
	// included unless the listener is loopback only, needs the internal
	// token.
	guard := rpcauth.NewGuard(rpcauth.GuardConfig{
		Token: n.internalToken,
		SelfAuthenticated: []string{
			corev1.Router_ServiceDesc.ServiceName, corev1.Admin_ServiceDesc.ServiceName, healthpb.Health_ServiceDesc.ServiceName,
		},
		OpenReflection: loopback(n.cfg.GRPCAddr),
	})
	idUnary, idStream := core.RequestIDInterceptors()
	opts := []grpc.ServerOption{
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		// grpc-go reads and decodes a call's whole request message before
		// any interceptor runs, so the guard also runs as a tap, when the
		// headers arrive: a call to a guarded service without the internal
		// token is refused before a byte of its message is held.
		grpc.InTapHandle(guard.Tap()),
		grpc.MaxRecvMsgSize(grpcMaxRecvBytes(n.cfg)),
		grpc.MaxHeaderListSize(grpcMaxHeaderBytes),
		grpc.MaxConcurrentStreams(grpcMaxStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// A network caller of Router is told its request's id.
		grpc.ChainUnaryInterceptor(recoverUnary(n.log), guard.Unary(), idUnary),
		grpc.ChainStreamInterceptor(recoverStream(n.log), guard.Stream(), idStream),
	}
	opts = append(opts, n.tracing.ServerOptions()...)
	n.grpcServer = grpc.NewServer(opts...)
	n.health = health.NewServer()
	healthpb.RegisterHealthServer(n.grpcServer, n.health)
	mem, err := grpc.NewClient("passthrough:///in-process",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(inproc.MaxMessageBytes)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return n.memLn.DialContext(ctx)
		}),
	)
	if err != nil {
		return fmt.Errorf("in-process connection: %w", err)
	}
	n.conns = append(n.conns, mem)
	unary := []grpc.UnaryServerInterceptor{recoverUnary(n.log), guard.Unary()}
	if ti := n.tracing.UnaryServerInterceptor(); ti != nil {
		unary = append(unary, ti) // core's server span, as on the network
	}
	n.local = inproc.New(mem, unary...)
	// Their handlers answer a body built afresh for each call, or a model
	// listing kept while the catalog is unchanged; the edge only reads
	// them, so it takes them as they are, without a copy.
	n.local.HandOver(corev1.Router_CreateEmbeddings_FullMethodName, corev1.Router_CompleteChat_FullMethodName,
		corev1.Router_ListModels_FullMethodName)
	streams := []grpc.StreamServerInterceptor{recoverStream(n.log), guard.Stream()}
	if ti := n.tracing.StreamServerInterceptor(); ti != nil {
		streams = append(streams, ti) // core's server span, as on the network
	}
	n.local.ServeStreams(streams...)
	healthpb.RegisterHealthServer(n.local, n.health)
	return nil
}

// The gRPC listener's bounds on what a peer may make it hold.
const (
	// grpcMinRecvBytes is the least request message the listener reads
	// (grpc-go's default): the Admin, billing and worker calls fit in it.
	grpcMinRecvBytes = 4 << 20
	// grpcEnvelopeBytes is the room a request message needs around the
	// body it carries (dialect, headers, options).
	grpcEnvelopeBytes = 1 << 20
	// grpcMaxHeaderBytes bounds a call's metadata (grpc-go reads 16 MiB by
	// default, held for as long as the call runs): twice the header bytes
	// the edge's HTTP routes accept, of which it forwards a part.
	grpcMaxHeaderBytes = 128 << 10
	// grpcMaxStreams bounds the calls one connection runs at once; a
	// client past it waits for one to end (HTTP/2 flow control), it is not
	// refused.
	grpcMaxStreams = 1024
)

// grpcMaxRecvBytes is the largest request message the gRPC listener reads:
// one carrying the largest body the HTTP routes accept (--max-body-bytes),
// so a role or a service calling the Router directly can send what a client
// of the edge can; audio goes in 64 KiB chunks. A larger message is refused
// with ResourceExhausted from its length prefix, before it is read.
func grpcMaxRecvBytes(cfg config.Config) int {
	body := cfg.MaxBodyBytes
	if body <= 0 {
		body = edge.DefaultMaxBodyBytes
	}
	return int(max(body, grpcMinRecvBytes) + grpcEnvelopeBytes)
}

// dial connects to a role's gRPC services: in process when this process
// serves them, else over the network.
// In process, unary calls and server streams go straight to the handlers
// (inproc), other streams over an in-memory gRPC connection.
// Over the network, addrs is one address, a comma separated list of them,
// or a DNS name with several addresses; calls are balanced round robin
// across the replicas whose health check reports service SERVING, so a
// replica that stops (NOT_SERVING while it drains) or dies is left out, and
// calls that never reached it are retried transparently on another.
// Either way calls carry the internal token and pass the same guard.
func (n *Node) dial(addrs, service string, local bool) (grpc.ClientConnInterface, error) {
	if local {
		// The token goes into the metadata inproc builds for each call
		// anyway (rpcauth.WithToken would copy the caller's first).
		return n.tracing.ClientConn(n.local.WithMetadata(contract.MDInternalToken, n.internalToken)), nil
	}
	target, res := balancedTarget(config.Addrs(addrs))
	if target == "" {
		return nil, fmt.Errorf("dial %s: no address", service)
	}
	opts, err := n.dialOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, grpc.WithDefaultServiceConfig(balancedServiceConfig(service)))
	if res != nil {
		opts = append(opts, grpc.WithResolvers(res))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addrs, err)
	}
	n.conns = append(n.conns, conn)
	return n.tracing.ClientConn(conn), nil
}

// dialOptions are the options of connections to other processes' roles:
// TLS when a CA is configured, the internal token on every call.
func (n *Node) dialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if tc := n.tlsConfig(); tc.ClientEnabled() {
		var err error
		if creds, err = rpcauth.ClientTLS(tc); err != nil {
			return nil, err
		}
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(inproc.MaxMessageBytes)),
	}
	if n.internalToken != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(rpcauth.TokenCredentials(n.internalToken)))
	}
	return opts, nil
}

// balancedTarget is the gRPC target of an address list: DNS for a single
// host name (every address it resolves to is a replica), else a fixed list.
func balancedTarget(addrs []string) (string, resolver.Builder) {
	switch len(addrs) {
	case 0:
		return "", nil
	case 1:
		if host, _, err := net.SplitHostPort(addrs[0]); err == nil && net.ParseIP(host) == nil {
			return "dns:///" + addrs[0], nil
		}
	}
	r := manual.NewBuilderWithScheme("switchboard-replicas")
	state := resolver.State{}
	for _, a := range addrs {
		// TLS verifies each replica under its own host name (the target's
		// authority names the list, not a host). The names come from the
		// operator's configuration.
		host, _, _ := net.SplitHostPort(a)
		state.Endpoints = append(state.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a, ServerName: host}}})
	}
	r.InitialState(state)
	return r.Scheme() + ":///replicas", r
}

// balancedServiceConfig spreads calls over every replica whose health check
// reports service as SERVING.
func balancedServiceConfig(service string) string {
	return `{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":"` + service + `"}}`
}

// NATS is the process's NATS connection (nil for an edge-only process).
func (n *Node) NATS() *nats.Conn { return n.nc }

// HTTPAddr is the edge's listen address.
func (n *Node) HTTPAddr() string {
	if n.edge == nil {
		return ""
	}
	return n.edge.Addr()
}

// GRPCAddr is core's gRPC listen address.
func (n *Node) GRPCAddr() string {
	if n.grpcLn == nil {
		return ""
	}
	return n.grpcLn.Addr().String()
}

// DefaultMachineID is core's default machine (empty without core).
func (n *Node) DefaultMachineID() string {
	if n.core == nil {
		return ""
	}
	return n.core.DefaultMachineID()
}

// Run runs the roles until ctx ends or one fails, then shuts down in order:
// stop accepting (health checks answer NOT_SERVING, so clients balancing
// across replicas move away; the edge stops listening), finish in-flight
// work (the edge's requests and the workers' jobs while core still answers,
// then the gRPC server's graceful stop, bounded by the shutdown timeout),
// then stop core and billing (core publishes the usage events it still
// buffers, including those of requests that finished during the drain),
// then close NATS and the embedded server.
func (n *Node) Run(ctx context.Context) error {
	defer n.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The roles' background work (core, billing) runs on its own context,
	// cancelled only once nothing can produce work for it any more.
	var back errgroup.Group
	backCtx, stopBack := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBack()
	backFailed := make(chan struct{})
	var failOnce sync.Once
	goBack := func(f func() error) {
		back.Go(func() error {
			err := f()
			if err != nil {
				failOnce.Do(func() { close(backFailed) })
			}
			return err
		})
	}
	if n.core != nil {
		n.core.EndLoginsWith(ctx)
		goBack(func() error { return n.core.Run(backCtx) })
	}
	if n.billing != nil {
		goBack(func() error { return n.billing.Run(backCtx) })
	}
	if n.metricsLn != nil {
		goBack(func() error { return n.metricsLn.Run(backCtx) })
	}
	var serving errgroup.Group
	if n.grpcServer != nil {
		serving.Go(func() error {
			err := serveGRPC(n.grpcServer, n.grpcLn)
			if err != nil {
				failOnce.Do(func() { close(backFailed) })
			}
			return err
		})
		serving.Go(func() error { return serveGRPC(n.grpcServer, n.memLn) })
		n.log.Info("grpc listening", "addr", n.GRPCAddr())
	}
	var front errgroup.Group
	run := func(f func(context.Context) error) {
		front.Go(func() error {
			err := f(ctx)
			cancel()
			return err
		})
	}
	if n.edge != nil {
		run(n.edge.Run)
	}
	if n.workers != nil {
		run(n.workers.Run)
	}
	// A back-end failure (core, billing, the gRPC listener) stops the front
	// too.
	go func() {
		select {
		case <-backFailed:
			cancel()
		case <-ctx.Done():
		}
	}()
	<-ctx.Done()
	// One deadline bounds the whole stop, counted from here: the edge's
	// drain (whose own timeout starts at this same moment, the end of
	// ctx) and then the gRPC server's share what is left of it.
	deadline := time.Now().Add(n.cfg.ShutdownTimeout)
	// Stop accepting: remote clients see NOT_SERVING and pick another
	// replica while this one drains.
	if n.health != nil {
		n.health.Shutdown()
	}
	// Finish in-flight work: the edge's requests, the workers' jobs.
	frontErr := front.Wait()
	if n.grpcServer != nil {
		stopped := make(chan struct{})
		go func() { n.grpcServer.GracefulStop(); close(stopped) }()
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-stopped:
		case <-timer.C:
			// The calls' handlers see their context end and return
			// (a stream bills what it delivered, as for a client that
			// left); GracefulStop waits for them before it returns.
			n.log.Warn("shutdown timeout over; closing the remaining grpc calls", "timeout", n.cfg.ShutdownTimeout)
			n.grpcServer.Stop()
			<-stopped
		}
		timer.Stop()
	}
	servingErr := serving.Wait()
	// Nothing can start a request any more: core and billing finish their
	// background work (core publishes its buffered usage events) and return.
	stopBack()
	backErr := back.Wait()
	return errors.Join(frontErr, servingErr, backErr)
}

func serveGRPC(s *grpc.Server, ln net.Listener) error {
	if err := s.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpc serve: %w", err)
	}
	return nil
}

// close releases the roles' state mirrors, connections and the embedded
// server; it is also what a failed Start runs.
func (n *Node) close() {
	if n.core != nil {
		n.core.Close()
	}
	if n.billing != nil {
		n.billing.Close()
	}
	for _, c := range n.conns {
		_ = c.Close()
	}
	if n.grpcServer != nil {
		n.grpcServer.Stop()
	}
	if n.nc != nil {
		n.nc.Close()
	}
	if n.embedded != nil {
		n.embedded.Shutdown()
	}
	n.stopTelemetry()
	n.lock.release()
}

// recoverUnary turns a panicking handler into an internal error instead of a
// dead process.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("panic in grpc handler", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("panic in grpc handler", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		return handler(srv, ss)
	}
}
