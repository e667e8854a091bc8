package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

// watcher is a health server whose Watch does what the requested service
// name says, to compare a stream served in place with one over gRPC.
type watcher struct {
	healthpb.UnimplementedHealthServer
	seen      chan metadata.MD
	cancelled chan error
}

func newWatcher() *watcher {
	return &watcher{seen: make(chan metadata.MD, 16), cancelled: make(chan error, 16)}
}

func (w *watcher) Watch(req *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	w.seen <- md
	service := req.GetService()
	req.Service = "changed by the handler"
	switch service {
	case "ok":
		if err := grpc.SetHeader(ctx, metadata.Pairs("X-Upstream-Us", "42")); err != nil {
			return err
		}
		// One message, reused: the caller must get each value as sent.
		m := &healthpb.HealthCheckResponse{}
		for _, st := range []healthpb.HealthCheckResponse_ServingStatus{
			healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVICE_UNKNOWN,
		} {
			m.Status = st
			if err := ss.SendMsg(m); err != nil {
				return err
			}
		}
		ss.SetTrailer(metadata.Pairs("T", "1"))
		return nil
	case "send-header":
		if err := ss.SendHeader(metadata.Pairs("h", "early")); err != nil {
			return err
		}
		return ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
	case "fail-early":
		return status.Error(codes.NotFound, "no such service")
	case "fail-late":
		if err := ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
		return status.Error(codes.ResourceExhausted, "all rate limited")
	case "plain-error":
		return errors.New("boom")
	case "block":
		if err := ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
		<-ctx.Done()
		w.cancelled <- ctx.Err()
		return ctx.Err()
	case "deaf":
		// Sends one response and, whatever SendMsg said, waits for its
		// context to end.
		_ = ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
		<-ctx.Done()
		w.cancelled <- ctx.Err()
		return ctx.Err()
	case "panic":
		panic("boom")
	}
	return status.Error(codes.InvalidArgument, "unknown case")
}

// recoverStream is an interceptor as the node chains them: a panicking
// handler becomes codes.Internal.
func recoverStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if recover() != nil {
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	return h(srv, ss)
}

// tagStream is a second interceptor: it refuses calls without
// authorization, as the guard does, to show the chain runs in order.
func tagStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	if len(md.Get("authorization")) == 0 {
		return status.Error(codes.Unauthenticated, "no authorization")
	}
	return h(srv, ss)
}

// inPlace is a connection serving w's streams in place, behind the two
// interceptors.
func inPlace(w *watcher) (*Conn, *watcher) {
	c := New(nil, nil)
	healthpb.RegisterHealthServer(c, w)
	c.ServeStreams(recoverStream, tagStream)
	return c, w
}

// connections are the two ways of reaching the same watcher: over a real
// gRPC connection (in memory) and in place.
func connections(t *testing.T) map[string]struct {
	conn grpc.ClientConnInterface
	w    *watcher
} {
	t.Helper()
	out := map[string]struct {
		conn grpc.ClientConnInterface
		w    *watcher
	}{}

	wg := newWatcher()
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(recoverStream, tagStream))
	healthpb.RegisterHealthServer(srv, wg)
	ln := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///mem",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	out["grpc"] = struct {
		conn grpc.ClientConnInterface
		w    *watcher
	}{cc, wg}

	c, wi := inPlace(newWatcher())
	out["in place"] = struct {
		conn grpc.ClientConnInterface
		w    *watcher
	}{c, wi}
	return out
}

func authorized() context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer k")
}

// Every case gives the same outcome over gRPC and in place.
func TestServerStreamsInPlaceBehaveAsOverGRPC(t *testing.T) {
	for name, c := range connections(t) {
		client := healthpb.NewHealthClient(c.conn)
		t.Run(name+"/responses, metadata, headers and trailers", func(t *testing.T) {
			req := &healthpb.HealthCheckRequest{Service: "ok"}
			var header, trailer metadata.MD
			stream, err := client.Watch(authorized(), req, grpc.Header(&header), grpc.Trailer(&trailer))
			require.NoError(t, err)
			var got []healthpb.HealthCheckResponse_ServingStatus
			for {
				m, err := stream.Recv()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				got = append(got, m.GetStatus())
			}
			assert.Equal(t, []healthpb.HealthCheckResponse_ServingStatus{
				healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVICE_UNKNOWN,
			}, got, "each response as it was sent, though the handler reused its message")
			md, err := stream.Header()
			require.NoError(t, err)
			assert.Equal(t, []string{"42"}, md.Get("x-upstream-us"))
			assert.Equal(t, []string{"1"}, stream.Trailer().Get("t"), "trailer keys lower-cased")
			assert.Equal(t, []string{"42"}, header.Get("x-upstream-us"), "the Header call option")
			assert.Equal(t, []string{"1"}, trailer.Get("t"), "the Trailer call option")
			assert.Equal(t, "ok", req.GetService(), "the handler works on its own copy of the request")
			seen := <-c.w.seen
			assert.Equal(t, []string{"Bearer k"}, seen.Get("authorization"), "outgoing metadata arrives as incoming")
		})
		t.Run(name+"/headers sent before the first response", func(t *testing.T) {
			stream, err := client.Watch(authorized(), &healthpb.HealthCheckRequest{Service: "send-header"})
			require.NoError(t, err)
			md, err := stream.Header()
			require.NoError(t, err)
			assert.Equal(t, []string{"early"}, md.Get("h"))
			_, err = stream.Recv()
			require.NoError(t, err)
			_, err = stream.Recv()
			assert.Equal(t, io.EOF, err)
			<-c.w.seen
		})
		for service, want := range map[string]codes.Code{
			"fail-early": codes.NotFound, "fail-late": codes.ResourceExhausted, "plain-error": codes.Unknown, "panic": codes.Internal,
		} {
			t.Run(name+"/"+service, func(t *testing.T) {
				stream, err := client.Watch(authorized(), &healthpb.HealthCheckRequest{Service: service})
				require.NoError(t, err)
				var last error
				for range 10 {
					if _, last = stream.Recv(); last != nil {
						break
					}
				}
				assert.Equal(t, want, status.Code(last), "%v", last)
				if service == "fail-late" {
					assert.Equal(t, "all rate limited", status.Convert(last).Message())
				}
				<-c.w.seen
			})
		}
		t.Run(name+"/interceptors run", func(t *testing.T) {
			stream, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: "ok"})
			require.NoError(t, err)
			_, err = stream.Recv()
			assert.Equal(t, codes.Unauthenticated, status.Code(err))
		})
		t.Run(name+"/cancelling the caller's context ends the handler's", func(t *testing.T) {
			ctx, cancel := context.WithCancel(authorized())
			defer cancel()
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "block"})
			require.NoError(t, err)
			_, err = stream.Recv()
			require.NoError(t, err)
			cancel()
			_, err = stream.Recv()
			assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)
			assert.ErrorIs(t, <-c.w.cancelled, context.Canceled, "the handler saw its context end")
			<-c.w.seen
		})
		t.Run(name+"/a context already done", func(t *testing.T) {
			ctx, cancel := context.WithCancel(authorized())
			cancel()
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "ok"})
			if err == nil {
				_, err = stream.Recv()
			}
			assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)
		})
	}
}

// Without ServeStreams, streams still need the fallback connection.
func TestStreamsInPlaceAreOptIn(t *testing.T) {
	c := New(nil, nil)
	healthpb.RegisterHealthServer(c, newWatcher())
	_, err := healthpb.NewHealthClient(c).Watch(authorized(), &healthpb.HealthCheckRequest{Service: "ok"})
	assert.Equal(t, codes.Unimplemented, status.Code(err))
}

// Many streams at once, callers reading at their own pace: every caller
// gets each response as it was sent, in order, then io.EOF, whichever side
// of the handoff (a waiting caller or an offered response) each one took.
func TestServerStreamsInPlaceUnderConcurrency(t *testing.T) {
	w := newWatcher()
	w.seen = make(chan metadata.MD, 1024)
	c, _ := inPlace(w)
	client := healthpb.NewHealthClient(c)
	want := []healthpb.HealthCheckResponse_ServingStatus{
		healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVICE_UNKNOWN,
	}
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			errs <- func() error {
				for i := range 20 {
					stream, err := client.Watch(authorized(), &healthpb.HealthCheckRequest{Service: "ok"})
					if err != nil {
						return err
					}
					var got []healthpb.HealthCheckResponse_ServingStatus
					for {
						if (g+i)%2 == 0 {
							runtime.Gosched() // let the handler offer first
						}
						m, err := stream.Recv()
						if err == io.EOF {
							break
						}
						if err != nil {
							return err
						}
						got = append(got, m.GetStatus())
					}
					if !slices.Equal(want, got) {
						return fmt.Errorf("got %v", got)
					}
					if tr := stream.Trailer().Get("t"); !slices.Equal(tr, []string{"1"}) {
						return fmt.Errorf("trailer %v", tr)
					}
				}
				return nil
			}()
		}()
	}
	for range 16 {
		require.NoError(t, <-errs)
	}
}

// The cost of a call in place with one response (a non-streamed chat's
// shape): the handoff between the caller and the handler's goroutine.
func BenchmarkServerStreamInPlaceOneResponse(b *testing.B) {
	c, w := inPlace(newWatcher())
	client := healthpb.NewHealthClient(c)
	ctx := authorized()
	req := &healthpb.HealthCheckRequest{Service: "send-header"}
	b.ReportAllocs()
	for b.Loop() {
		stream, err := client.Watch(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			b.Fatal(err)
		}
		if _, err := stream.Recv(); err != io.EOF {
			b.Fatal(err)
		}
		<-w.seen
	}
}

// Check records the call's metadata, for the unary side of WithMetadata.
func (w *watcher) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	w.seen <- md
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// A WithMetadata connection sets its entry on every call, replacing the
// caller's, whether the call is served in place or on the fallback
// connection; the caller's own metadata is left as it was.
func TestWithMetadataSetsItsEntryOnEveryCall(t *testing.T) {
	conns := connections(t)
	// Nothing registered in place: every call takes the fallback (gRPC).
	fallback := New(conns["grpc"].conn, nil)
	for name, c := range map[string]struct {
		conn grpc.ClientConnInterface
		w    *watcher
	}{
		"in place": {conns["in place"].conn.(*Conn).WithMetadata("Authorization", "Bearer set"), conns["in place"].w},
		"fallback": {fallback.WithMetadata("Authorization", "Bearer set"), conns["grpc"].w},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer caller", "k", "v")
			client := healthpb.NewHealthClient(c.conn)
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "send-header"})
			require.NoError(t, err)
			_, err = stream.Recv()
			require.NoError(t, err)
			seen := <-c.w.seen
			assert.Equal(t, []string{"Bearer set"}, seen.Get("authorization"), "stream")
			assert.Equal(t, []string{"v"}, seen.Get("k"))

			_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
			seen = <-c.w.seen
			assert.Equal(t, []string{"Bearer set"}, seen.Get("authorization"), "unary")

			mine, _ := metadata.FromOutgoingContext(ctx)
			assert.Equal(t, []string{"Bearer caller"}, mine.Get("authorization"), "the caller's metadata is its own")
		})
	}
}

// receiveAll is how a caller using Deliver reads a stream: responses go to
// fn, whether the handler delivered them in place (within the first Recv)
// or Recv returned them (any other connection); it returns the end.
func receiveAll(stream grpc.ServerStreamingClient[healthpb.HealthCheckResponse], fn func(proto.Message) error) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}

// With Deliver, a stream's responses, headers, trailers and end are the
// same in place (the handler on the caller's goroutine, sending to fn) as
// over gRPC (fn fed from Recv).
func TestDeliverBehavesAsReceiving(t *testing.T) {
	for name, c := range connections(t) {
		client := healthpb.NewHealthClient(c.conn)
		t.Run(name+"/responses, headers and trailers", func(t *testing.T) {
			req := &healthpb.HealthCheckRequest{Service: "ok"}
			var header, trailer metadata.MD
			var got []healthpb.HealthCheckResponse_ServingStatus
			var stream grpc.ServerStreamingClient[healthpb.HealthCheckResponse]
			var headerSeen metadata.MD
			fn := func(m proto.Message) error {
				if headerSeen == nil {
					md, err := stream.Header()
					require.NoError(t, err)
					headerSeen = md
				}
				got = append(got, m.(*healthpb.HealthCheckResponse).GetStatus())
				return nil
			}
			stream, err := client.Watch(authorized(), req, grpc.Header(&header), grpc.Trailer(&trailer), Deliver(fn))
			require.NoError(t, err)
			assert.Equal(t, io.EOF, receiveAll(stream, fn))
			assert.Equal(t, []healthpb.HealthCheckResponse_ServingStatus{
				healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVICE_UNKNOWN,
			}, got, "each response as it was sent, though the handler reused its message")
			assert.Equal(t, []string{"42"}, headerSeen.Get("x-upstream-us"), "Header called from fn")
			assert.Equal(t, []string{"1"}, stream.Trailer().Get("t"))
			assert.Equal(t, []string{"42"}, header.Get("x-upstream-us"), "the Header call option")
			assert.Equal(t, []string{"1"}, trailer.Get("t"), "the Trailer call option")
			assert.Equal(t, "ok", req.GetService(), "the handler works on its own copy of the request")
			<-c.w.seen
		})
		for service, want := range map[string]codes.Code{
			"fail-early": codes.NotFound, "fail-late": codes.ResourceExhausted, "plain-error": codes.Unknown, "panic": codes.Internal,
		} {
			t.Run(name+"/"+service, func(t *testing.T) {
				n := 0
				fn := func(proto.Message) error { n++; return nil }
				stream, err := client.Watch(authorized(), &healthpb.HealthCheckRequest{Service: service}, Deliver(fn))
				require.NoError(t, err)
				err = receiveAll(stream, fn)
				assert.Equal(t, want, status.Code(err), "%v", err)
				if service == "fail-late" {
					assert.Equal(t, 1, n, "the response before the error")
					assert.Equal(t, "all rate limited", status.Convert(err).Message())
				}
				<-c.w.seen
			})
		}
		t.Run(name+"/header before any response", func(t *testing.T) {
			fn := func(proto.Message) error { return nil }
			stream, err := client.Watch(authorized(), &healthpb.HealthCheckRequest{Service: "send-header"}, Deliver(fn))
			require.NoError(t, err)
			md, err := stream.Header()
			require.NoError(t, err)
			assert.Equal(t, []string{"early"}, md.Get("h"))
			assert.Equal(t, io.EOF, receiveAll(stream, fn))
			<-c.w.seen
		})
		t.Run(name+"/interceptors run", func(t *testing.T) {
			fn := func(proto.Message) error { t.Error("a response past the interceptor"); return nil }
			stream, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: "ok"}, Deliver(fn))
			require.NoError(t, err)
			assert.Equal(t, codes.Unauthenticated, status.Code(receiveAll(stream, fn)))
		})
		t.Run(name+"/cancelling the caller's context ends the handler's", func(t *testing.T) {
			ctx, cancel := context.WithCancel(authorized())
			defer cancel()
			fn := func(proto.Message) error { cancel(); return nil } // the client left after the first response
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "block"}, Deliver(fn))
			require.NoError(t, err)
			err = receiveAll(stream, fn)
			assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)
			assert.ErrorIs(t, <-c.w.cancelled, context.Canceled, "the handler saw its context end")
			<-c.w.seen
		})
	}
}

// A caller whose fn fails (its client went away) ends the call served in
// place: the handler's SendMsg fails and its context ends, as a handler
// sees a client leave over the wire.
func TestDeliverErrorEndsTheHandler(t *testing.T) {
	c, w := inPlace(newWatcher())
	gone := errors.New("client gone")
	calls := 0
	fn := func(proto.Message) error { calls++; return gone }
	stream, err := healthpb.NewHealthClient(c).Watch(authorized(), &healthpb.HealthCheckRequest{Service: "ok"}, Deliver(fn))
	require.NoError(t, err)
	err = receiveAll(stream, fn)
	assert.Equal(t, codes.Canceled, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "client gone")
	assert.Equal(t, 1, calls, "no response after the failed one")
	<-w.seen

	stream, err = healthpb.NewHealthClient(c).Watch(authorized(), &healthpb.HealthCheckRequest{Service: "deaf"}, Deliver(fn))
	require.NoError(t, err)
	assert.Error(t, receiveAll(stream, fn))
	assert.ErrorIs(t, <-w.cancelled, context.Canceled, "the handler's context ended with the failed delivery")
	<-w.seen
}

// Deliver runs the handler on the caller's goroutine: responses reach fn
// before the first Recv returns, and no goroutine is started for the call.
func TestDeliverServesOnTheCallersGoroutine(t *testing.T) {
	c, w := inPlace(newWatcher())
	var got int
	fn := func(proto.Message) error { got++; return nil }
	stream, err := healthpb.NewHealthClient(c).Watch(authorized(), &healthpb.HealthCheckRequest{Service: "ok"}, Deliver(fn))
	require.NoError(t, err)
	assert.Zero(t, got, "nothing runs before the caller receives")
	assert.Zero(t, len(w.seen), "the handler has not started")
	_, err = stream.Recv()
	assert.Equal(t, io.EOF, err, "the first Recv returns the end")
	assert.Equal(t, 3, got, "every response went to fn within it")
	_, err = stream.Recv()
	assert.Equal(t, io.EOF, err, "and every later one too")
	<-w.seen
}

// The cost of a call in place with one response, delivered on the
// caller's goroutine (compare BenchmarkServerStreamInPlaceOneResponse).
func BenchmarkServerStreamDeliveredOneResponse(b *testing.B) {
	c, w := inPlace(newWatcher())
	client := healthpb.NewHealthClient(c)
	ctx := authorized()
	req := &healthpb.HealthCheckRequest{Service: "send-header"}
	n := 0
	opt := Deliver(func(proto.Message) error { n++; return nil })
	b.ReportAllocs()
	for b.Loop() {
		stream, err := client.Watch(ctx, req, opt)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := stream.Recv(); err != io.EOF {
			b.Fatal(err)
		}
		<-w.seen
	}
	if n != b.N {
		b.Fatalf("%d responses for %d calls", n, b.N)
	}
}

// A panic in the Deliver function is the caller's: it reaches the caller
// as it was raised (net/http's handler sees it, as it would over the
// wire), the handler's interceptors do not turn it into a status, and the
// handler's context ends.
func TestDeliverPanicIsTheCallers(t *testing.T) {
	c, w := inPlace(newWatcher())
	fn := func(proto.Message) error { panic("caller's bug") }
	stream, err := healthpb.NewHealthClient(c).Watch(authorized(), &healthpb.HealthCheckRequest{Service: "deaf"}, Deliver(fn))
	require.NoError(t, err)
	require.PanicsWithValue(t, "caller's bug", func() { _, _ = stream.Recv() })
	assert.ErrorIs(t, <-w.cancelled, context.Canceled, "the handler's context ended")
	<-w.seen
}
