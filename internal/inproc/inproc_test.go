package inproc

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

// probe is a health server that also reports what a handler sees.
type probe struct {
	healthpb.UnimplementedHealthServer
	seen metadata.MD
}

func (p *probe) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	p.seen, _ = metadata.FromIncomingContext(ctx)
	if err := grpc.SetHeader(ctx, metadata.Pairs("X-Upstream-Us", "42")); err != nil {
		return nil, err
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs("t", "1"))
	if req.GetService() == "fail" {
		return nil, status.Error(codes.NotFound, "no such service")
	}
	if req.GetService() == "panic" {
		panic("boom")
	}
	req.Service = "changed by the handler"
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func TestUnaryCallsInProcess(t *testing.T) {
	recovered := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if recover() != nil {
				err = status.Error(codes.Internal, "internal error")
			}
		}()
		return h(ctx, req)
	}
	c := New(nil, recovered)
	p := &probe{}
	healthpb.RegisterHealthServer(c, p)
	client := healthpb.NewHealthClient(c)

	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer k")
	var header, trailer metadata.MD
	req := &healthpb.HealthCheckRequest{Service: "core"}
	resp, err := client.Check(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	assert.Equal(t, []string{"Bearer k"}, p.seen.Get("authorization"), "outgoing metadata arrives as incoming")
	assert.Equal(t, []string{"42"}, header.Get("x-upstream-us"), "headers reach the caller, keys lower-cased")
	assert.Equal(t, []string{"1"}, trailer.Get("t"))
	assert.Equal(t, "core", req.GetService(), "the handler works on its own copy of the request")

	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "fail"})
	assert.Equal(t, codes.NotFound, status.Code(err), "status errors pass through")
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "panic"})
	assert.Equal(t, codes.Internal, status.Code(err), "the interceptor runs")

	err = c.Invoke(ctx, "/no.Such/Method", req, resp)
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	_, err = healthpb.NewHealthClient(c).Watch(ctx, req)
	assert.Equal(t, codes.Unimplemented, status.Code(err), "streams need the fallback connection")
}

func TestRealHealthServer(t *testing.T) {
	c := New(nil, nil)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(c, hs)
	hs.SetServingStatus("x", healthpb.HealthCheckResponse_NOT_SERVING)
	resp, err := healthpb.NewHealthClient(c).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "x"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, resp.GetStatus())
}

// TestMessageLimitSameAsNetwork sends a message one byte over
// MaxMessageBytes both ways a role can be reached: a gRPC server with
// MaxRecvMsgSize(MaxMessageBytes) refuses it with ResourceExhausted, and so
// does the in-process path, before the handler sees it.
func TestMessageLimitSameAsNetwork(t *testing.T) {
	over := &healthpb.HealthCheckRequest{Service: strings.Repeat("x", MaxMessageBytes)}
	require.Greater(t, proto.Size(over), MaxMessageBytes)
	under := &healthpb.HealthCheckRequest{Service: "x"}

	ln := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes))
	p := &probe{}
	healthpb.RegisterHealthServer(srv, p)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	netConn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = netConn.Close() })

	local := New(nil, nil)
	lp := &probe{}
	healthpb.RegisterHealthServer(local, lp)

	for name, conn := range map[string]grpc.ClientConnInterface{"network": netConn, "in process": local} {
		_, err := healthpb.NewHealthClient(conn).Check(context.Background(), over)
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%s: %v", name, err)
		_, err = healthpb.NewHealthClient(conn).Check(context.Background(), under)
		assert.NoError(t, err, name)
	}
}

// Several unary interceptors run in the order given, the first outermost,
// as grpc.ChainUnaryInterceptor runs them on the real server.
func TestUnaryInterceptorsChainInOrder(t *testing.T) {
	var order []string
	mark := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			order = append(order, name+" in")
			resp, err := h(ctx, req)
			order = append(order, name+" out")
			return resp, err
		}
	}
	c := New(nil, mark("outer"), nil, mark("inner"))
	healthpb.RegisterHealthServer(c, &probe{})
	_, err := healthpb.NewHealthClient(c).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{"outer in", "inner in", "inner out", "outer out"}, order)
}
