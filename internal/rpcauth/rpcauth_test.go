package rpcauth_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/rpcauth"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

const token = "rpcauth-test-token-0123456789"

// whoami is a health server that reports, as the status, whether the call
// came from a role and which user was vouched for.
type whoami struct {
	healthpb.UnimplementedHealthServer
	seen chan rpcauth.User
}

func (w *whoami) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	u, err := rpcauth.VouchedUser(ctx)
	if err != nil {
		u = rpcauth.User{}
	}
	w.seen <- u
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// serve runs a real gRPC server on loopback behind a Guard and returns its
// address.
func serve(t *testing.T, cfg rpcauth.GuardConfig, register func(*grpc.Server)) string {
	t.Helper()
	g := rpcauth.NewGuard(cfg)
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(g.Unary()), grpc.ChainStreamInterceptor(g.Stream()))
	register(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestGuard(t *testing.T) {
	w := &whoami{seen: make(chan rpcauth.User, 1)}
	addr := serve(t, rpcauth.GuardConfig{Token: token}, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, w) })
	withToken := func(v ...string) context.Context {
		md := metadata.MD{}
		for _, x := range v {
			md.Append(contract.MDInternalToken, x)
		}
		return metadata.NewOutgoingContext(context.Background(), md)
	}
	tests := []struct {
		name string
		ctx  context.Context
		ok   bool
	}{
		{"no credential", context.Background(), false},
		{"wrong token", withToken("rpcauth-test-token-0123456780"), false},
		{"token prefix", withToken(token[:10]), false},
		{"empty token", withToken(""), false},
		{"two tokens", withToken(token, token), false},
		{"the token", withToken(token), true},
	}
	client := healthpb.NewHealthClient(dial(t, addr))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Check(tt.ctx, &healthpb.HealthCheckRequest{})
			if !tt.ok {
				assert.Equal(t, codes.Unauthenticated, status.Code(err))
				assert.NotContains(t, status.Convert(err).Message(), token)
				return
			}
			require.NoError(t, err)
			<-w.seen
		})
	}
}

// A Guard without a token admits nobody to guarded methods, not even a
// caller sending an empty token.
func TestGuardWithoutToken(t *testing.T) {
	w := &whoami{seen: make(chan rpcauth.User, 1)}
	addr := serve(t, rpcauth.GuardConfig{}, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, w) })
	ctx := metadata.AppendToOutgoingContext(context.Background(), contract.MDInternalToken, "")
	_, err := healthpb.NewHealthClient(dial(t, addr)).Check(ctx, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
}

// Self-authenticated services pass without the token (their handlers check
// callers), and a vouched user is believed only from a caller with it.
func TestVouchedUserOnlyFromRoles(t *testing.T) {
	w := &whoami{seen: make(chan rpcauth.User, 1)}
	addr := serve(t, rpcauth.GuardConfig{Token: token, SelfAuthenticated: []string{healthpb.Health_ServiceDesc.ServiceName}},
		func(s *grpc.Server) { healthpb.RegisterHealthServer(s, w) })
	u := rpcauth.User{ID: "üser/1 +x", Email: "zoë@example.com"}
	anon := healthpb.NewHealthClient(dial(t, addr))
	_, err := anon.Check(rpcauth.VouchUser(context.Background(), u), &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "the open service answers")
	assert.Equal(t, rpcauth.User{}, <-w.seen, "a user vouched for by an anonymous caller is ignored")

	role := healthpb.NewHealthClient(dial(t, addr, grpc.WithPerRPCCredentials(rpcauth.TokenCredentials(token))))
	_, err = role.Check(rpcauth.VouchUser(context.Background(), u), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, u, <-w.seen, "non-ASCII ids and emails survive the metadata")

	// Vouching again replaces; an empty user removes.
	ctx := rpcauth.VouchUser(rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "first"}), rpcauth.User{ID: "second"})
	_, err = role.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, "second", (<-w.seen).ID)
	_, err = role.Check(rpcauth.VouchUser(ctx, rpcauth.User{}), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, rpcauth.User{}, <-w.seen)

	// Two user ids (say one smuggled in beside the edge's) name nobody.
	two := metadata.AppendToOutgoingContext(context.Background(), contract.MDUserID, "a", contract.MDUserID, "b")
	_, err = role.Check(two, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, rpcauth.User{}, <-w.seen)
}

// Reflection on a listener that is not loopback-only needs the token.
func TestReflection(t *testing.T) {
	list := func(t *testing.T, conn *grpc.ClientConn) error {
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
		require.NoError(t, err)
		// A refused stream may already be closed when Send runs: Send then
		// says io.EOF and Recv has the status.
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	register := func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, health.NewServer())
		reflection.Register(s)
	}
	closed := serve(t, rpcauth.GuardConfig{Token: token}, register)
	assert.Equal(t, codes.Unauthenticated, status.Code(list(t, dial(t, closed))), "anonymous reflection is refused")
	assert.NoError(t, list(t, dial(t, closed, grpc.WithPerRPCCredentials(rpcauth.TokenCredentials(token)))))

	open := serve(t, rpcauth.GuardConfig{Token: token, OpenReflection: true}, register)
	assert.NoError(t, list(t, dial(t, open)), "a loopback-only listener lets local tools reflect")
}

// WithToken attaches the token to calls of a connection that is not dialed
// (the in-process one).
func TestWithToken(t *testing.T) {
	w := &whoami{seen: make(chan rpcauth.User, 1)}
	addr := serve(t, rpcauth.GuardConfig{Token: token}, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, w) })
	conn := rpcauth.WithToken(dial(t, addr), token)
	_, err := healthpb.NewHealthClient(conn).Check(rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "u"}), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, "u", (<-w.seen).ID)
}

// adminCheck is a health server that answers SERVING only to an operator's
// call (VouchedAdmin).
type adminCheck struct {
	healthpb.UnimplementedHealthServer
}

func (adminCheck) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if rpcauth.VouchedAdmin(ctx) != nil {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func TestVouchedAdminOnlyFromRoles(t *testing.T) {
	addr := serve(t, rpcauth.GuardConfig{Token: token, SelfAuthenticated: []string{healthpb.Health_ServiceDesc.ServiceName}},
		func(s *grpc.Server) { healthpb.RegisterHealthServer(s, adminCheck{}) })
	anon := healthpb.NewHealthClient(dial(t, addr))
	role := healthpb.NewHealthClient(dial(t, addr, grpc.WithPerRPCCredentials(rpcauth.TokenCredentials(token))))
	admin := rpcauth.VouchAdmin(context.Background())
	cases := []struct {
		name   string
		client healthpb.HealthClient
		ctx    context.Context
		admit  bool
	}{
		{"role vouching an admin", role, admin, true},
		{"anonymous caller claiming admin", anon, admin, false},
		{"role without the flag", role, context.Background(), false},
		{"role vouching a user", role, rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "u"}), false},
		{"admin and a user", role, metadata.AppendToOutgoingContext(admin, contract.MDUserID, "u"), false},
		{"VouchAdmin drops a user vouched before", role, rpcauth.VouchAdmin(rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "u", Email: "e"})), true},
		{"two flags", role, metadata.AppendToOutgoingContext(admin, contract.MDAdmin, "1"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.client.Check(tc.ctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			assert.Equal(t, tc.admit, resp.GetStatus() == healthpb.HealthCheckResponse_SERVING)
		})
	}
}

// The token, a vouched user and an operator's mark go on the call's own
// metadata: the caller's outgoing metadata (shared by every call made with
// its context) is left as it was.
func TestVouchingLeavesCallersMetadataAlone(t *testing.T) {
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(contract.MDUserID, "other", "k", "v"))
	before, _ := metadata.FromOutgoingContext(ctx)

	var seen metadata.MD
	err := rpcauth.WithToken(recorder{seen: &seen}, token).Invoke(rpcauth.VouchAdmin(rpcauth.VouchUser(ctx, rpcauth.User{ID: "u"})), "/m", nil, nil)
	require.NoError(t, err)

	after, _ := metadata.FromOutgoingContext(ctx)
	assert.Equal(t, before, after, "the caller's metadata is unchanged")
	assert.Equal(t, []string{token}, seen.Get(contract.MDInternalToken))
	assert.Equal(t, []string{"1"}, seen.Get(contract.MDAdmin))
	assert.Empty(t, seen.Get(contract.MDUserID))
	assert.Equal(t, []string{"v"}, seen.Get("k"))
}

// recorder is a connection that records the outgoing metadata of a call.
type recorder struct{ seen *metadata.MD }

func (r recorder) Invoke(ctx context.Context, _ string, _, _ any, _ ...grpc.CallOption) error {
	*r.seen, _ = metadata.FromOutgoingContext(ctx)
	return nil
}

func (r recorder) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("unused")
}

// roleWatch is a health server whose Watch answers SERVING only to a
// role's call, and names the vouched user in its trailer.
type roleWatch struct {
	healthpb.UnimplementedHealthServer
}

func (roleWatch) Watch(_ *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := ss.Context()
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if rpcauth.FromRole(ctx) {
		st = healthpb.HealthCheckResponse_SERVING
	}
	if u, err := rpcauth.VouchedUser(ctx); err == nil {
		ss.SetTrailer(metadata.Pairs("user", u.ID))
	}
	if _, ok := ctx.Deadline(); !ok {
		return status.Error(codes.FailedPrecondition, "the caller's deadline is lost")
	}
	return ss.Send(&healthpb.HealthCheckResponse{Status: st})
}

// On a stream, the Guard marks a call with the token as a role's (and the
// context keeps everything else, the deadline included); a call without
// it reaches a self-authenticated service unmarked.
func TestGuardMarksRoleStreams(t *testing.T) {
	addr := serve(t, rpcauth.GuardConfig{Token: token, SelfAuthenticated: []string{healthpb.Health_ServiceDesc.ServiceName}},
		func(s *grpc.Server) { healthpb.RegisterHealthServer(s, roleWatch{}) })
	conn := dial(t, addr)
	for name, tc := range map[string]struct {
		conn grpc.ClientConnInterface
		want healthpb.HealthCheckResponse_ServingStatus
		user []string
	}{
		"with the token": {rpcauth.WithToken(conn, token), healthpb.HealthCheckResponse_SERVING, []string{"u"}},
		"without":        {conn, healthpb.HealthCheckResponse_NOT_SERVING, nil},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(rpcauth.VouchUser(context.Background(), rpcauth.User{ID: "u"}), time.Minute)
			defer cancel()
			stream, err := healthpb.NewHealthClient(tc.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			m, err := stream.Recv()
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.GetStatus())
			_, err = stream.Recv()
			assert.Equal(t, io.EOF, err)
			assert.Equal(t, tc.user, stream.Trailer().Get("user"))
		})
	}
}
