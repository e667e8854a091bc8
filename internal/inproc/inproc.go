// Package inproc lets one process call its own gRPC services without a
// network hop: unary calls go straight to the registered handler, with the
// metadata, headers, trailers and status a real connection would carry.
// Server streams run in place too once ServeStreams was called (stream.go);
// other streaming calls go through a fallback connection (an in-memory gRPC
// connection to the same services).
package inproc

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxMessageBytes is the largest message a gRPC call between roles
// carries, either way: the network server's MaxRecvMsgSize and its clients'
// MaxCallRecvMsgSize are set to it, and an in-process call enforces it the
// same way, with the same status (ResourceExhausted).
const MaxMessageBytes = 64 << 20

// Conn is a grpc.ServiceRegistrar to register services on and a
// grpc.ClientConnInterface to call them through.
type Conn struct {
	fallback    grpc.ClientConnInterface
	interceptor grpc.UnaryServerInterceptor

	mu      sync.RWMutex
	methods map[string]method
	// Server streams served in place (stream.go).
	streams        map[string]streamMethod
	streamsInPlace bool
	streamChain    []grpc.StreamServerInterceptor
	// handOver are the unary methods whose response is given to the
	// caller as it is instead of copied (see HandOver).
	handOver map[string]bool
}

type method struct {
	impl    any
	handler grpc.MethodHandler
}

var (
	_ grpc.ServiceRegistrar    = (*Conn)(nil)
	_ grpc.ClientConnInterface = (*Conn)(nil)
)

// New returns a Conn whose streaming calls use fallback and whose unary
// handlers run behind interceptors (the first outermost, nil ones left out),
// as on the real server.
func New(fallback grpc.ClientConnInterface, interceptors ...grpc.UnaryServerInterceptor) *Conn {
	return &Conn{fallback: fallback, interceptor: chainUnary(interceptors), methods: make(map[string]method)}
}

// chainUnary runs interceptors in order around a handler, as
// grpc.ChainUnaryInterceptor does on the real server.
func chainUnary(is []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	var chain []grpc.UnaryServerInterceptor
	for _, i := range is {
		if i != nil {
			chain = append(chain, i)
		}
	}
	if len(chain) == 0 {
		return nil
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var call func(i int, ctx context.Context, req any) (any, error)
		call = func(i int, ctx context.Context, req any) (any, error) {
			if i == len(chain) {
				return handler(ctx, req)
			}
			return chain[i](ctx, req, info, func(ctx context.Context, req any) (any, error) { return call(i+1, ctx, req) })
		}
		return call(0, ctx, req)
	}
}

// RegisterService records a service's unary methods.
func (c *Conn) RegisterService(desc *grpc.ServiceDesc, impl any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range desc.Methods {
		c.methods["/"+desc.ServiceName+"/"+m.MethodName] = method{impl: impl, handler: m.Handler}
	}
	c.registerStreams(desc, impl)
}

// HandOver makes the responses of these unary methods (full names) go to
// the caller as they are, their fields shared instead of copied: for
// methods that answer large payloads (an embeddings body, a whole chat
// answer, a model listing). A handler must not change a response once it
// sized or returned it (the in-process size check reads the size a message
// keeps; over the network it is marshalled then anyway). It may
// return the same message again (a cached listing) only when every caller
// in this process reads the response without changing it, since they all
// share its fields.
func (c *Conn) HandOver(methods ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handOver == nil {
		c.handOver = make(map[string]bool, len(methods))
	}
	for _, m := range methods {
		c.handOver[m] = true
	}
}

// Invoke calls a unary method in process.
func (c *Conn) Invoke(ctx context.Context, fullMethod string, args, reply any, opts ...grpc.CallOption) error {
	return c.invoke(ctx, fullMethod, args, reply, nil, opts)
}

// NewStream opens a streaming call: in place for a server stream once
// ServeStreams was called, else on the fallback connection.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.newStream(ctx, desc, method, nil, opts)
}

// WithMetadata returns a connection to the same services on which every
// call carries key: value in its metadata, replacing any value the caller
// set there (as metadata.MD.Set on the call's own copy would): how a
// role's credential rides on the in-process path. A call served in place
// gets it in the incoming metadata built for the handler anyway, so it
// costs no second copy of the caller's metadata; a call on the fallback
// connection gets it in its outgoing metadata.
func (c *Conn) WithMetadata(key, value string) grpc.ClientConnInterface {
	return &withMetadata{c: c, set: &pair{key: strings.ToLower(key), value: value}}
}

// pair is one metadata entry a WithMetadata connection sets.
type pair struct{ key, value string }

type withMetadata struct {
	c   *Conn
	set *pair
}

func (w *withMetadata) Invoke(ctx context.Context, fullMethod string, args, reply any, opts ...grpc.CallOption) error {
	return w.c.invoke(ctx, fullMethod, args, reply, w.set, opts)
}

func (w *withMetadata) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return w.c.newStream(ctx, desc, method, w.set, opts)
}

// incoming is the metadata a handler served in place receives: a copy of
// ctx's outgoing metadata (FromOutgoingContext returns a fresh one, keys
// lower-cased, as a connection delivers them), with set applied.
func incoming(ctx context.Context, set *pair) metadata.MD {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		md = metadata.MD{}
	}
	if set != nil {
		md[set.key] = []string{set.value}
	}
	return md
}

// outgoing is ctx with set applied to its outgoing metadata, for a call on
// the fallback connection.
func outgoing(ctx context.Context, set *pair) context.Context {
	if set == nil {
		return ctx
	}
	md, ok := metadata.FromOutgoingContext(ctx) // a new MD: ours to change
	if !ok {
		md = metadata.MD{}
	}
	md[set.key] = []string{set.value}
	return metadata.NewOutgoingContext(ctx, md)
}

func (c *Conn) invoke(ctx context.Context, fullMethod string, args, reply any, set *pair, opts []grpc.CallOption) error {
	c.mu.RLock()
	m, ok := c.methods[fullMethod]
	handOver := c.handOver[fullMethod]
	c.mu.RUnlock()
	if !ok {
		if c.fallback == nil {
			return status.Errorf(codes.Unimplemented, "unknown method %s", fullMethod)
		}
		return c.fallback.Invoke(outgoing(ctx, set), fullMethod, args, reply, opts...)
	}
	in, ok := args.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok || !ok2 {
		return status.Error(codes.Internal, "inproc: messages must be protobuf")
	}
	if n := proto.Size(in); n > MaxMessageBytes {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, MaxMessageBytes)
	}
	st := &serverStream{method: fullMethod}
	sctx := grpc.NewContextWithServerTransportStream(metadata.NewIncomingContext(ctx, incoming(ctx, set)), st)
	dec := func(v any) error {
		// The handler owns what it decodes, as it would own a message
		// read from the wire: give it a copy.
		proto.Merge(v.(proto.Message), in)
		return nil
	}
	resp, err := m.handler(m.impl, sctx, dec, c.interceptor)
	st.deliver(opts)
	if err != nil {
		if _, isStatus := status.FromError(err); !isStatus {
			err = status.Error(codes.Unknown, err.Error())
		}
		return err
	}
	if resp == nil {
		return status.Error(codes.Internal, fmt.Sprintf("inproc: %s returned no message", fullMethod))
	}
	// A handed-over response is not changed once returned (HandOver), so a
	// size worked out before stays true: one answered again (a kept
	// listing) is not walked again. Other handlers may size a message and
	// change it before returning it: theirs are walked.
	if n := (proto.MarshalOptions{UseCachedSize: handOver}).Size(resp.(proto.Message)); n > MaxMessageBytes {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, MaxMessageBytes)
	}
	proto.Reset(out)
	if handOver {
		move(out, resp.(proto.Message))
		return nil
	}
	proto.Merge(out, resp.(proto.Message))
	return nil
}

// move sets src's populated fields on dst as they are: bytes, lists and
// messages end up shared, not copied. dst is of src's type.
func move(dst, src proto.Message) {
	d := dst.ProtoReflect()
	if d.Descriptor() != src.ProtoReflect().Descriptor() {
		proto.Merge(dst, src) // reports the mismatch as Merge does
		return
	}
	src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
}

func (c *Conn) newStream(ctx context.Context, desc *grpc.StreamDesc, method string, set *pair, opts []grpc.CallOption) (grpc.ClientStream, error) {
	if m, ok := c.localStream(method); ok {
		return c.newLocalStream(ctx, m, method, set, opts)
	}
	if c.fallback == nil {
		return nil, status.Errorf(codes.Unimplemented, "inproc: no connection for streaming method %s", method)
	}
	return c.fallback.NewStream(outgoing(ctx, set), desc, method, opts...)
}

// serverStream collects what a handler sets with grpc.SetHeader,
// grpc.SendHeader and grpc.SetTrailer.
type serverStream struct {
	method  string
	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
}

func (s *serverStream) Method() string { return s.method }

func (s *serverStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = join(s.header, md)
	return nil
}

func (s *serverStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

func (s *serverStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = join(s.trailer, md)
	return nil
}

// deliver hands headers and trailers to the caller's call options.
func (s *serverStream) deliver(opts []grpc.CallOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deliverTo(opts, s.header, s.trailer)
}

// join adds md to into, keys lower-cased as the wire delivers them; into
// may be nil (the result is then a new MD).
func join(into, md metadata.MD) metadata.MD {
	if into == nil {
		return lower(md)
	}
	for k, v := range md {
		k = strings.ToLower(k)
		into[k] = append(into[k], v...)
	}
	return into
}

// lower returns md with lower-case keys, as the wire delivers them.
func lower(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		k = strings.ToLower(k)
		out[k] = append(out[k], v...)
	}
	return out
}
