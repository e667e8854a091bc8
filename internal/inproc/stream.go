package inproc

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Server streams in place: once ServeStreams was called, a call to a
// registered server-streaming method (one request, a stream of responses)
// runs its handler in a goroutine of this process, behind the stream
// interceptors, and hands each response to the caller without gRPC framing,
// HTTP/2 or serialization. What the callers rely on is kept:
//
//   - the handler works on its own copy of the request, and the caller
//     receives its own copy of each response: SendMsg returns once the
//     message was copied into the caller's (by the handler when the caller
//     is already waiting in RecvMsg, else by the caller when it comes), so
//     a handler may reuse it, as over the wire, and waits for a caller that
//     does not read, as flow control would; each response costs one
//     goroutine wakeup;
//   - outgoing metadata arrives as incoming metadata; headers (SetHeader,
//     SendHeader, sent with the first response at the latest) reach
//     Header(), trailers reach Trailer() and the call options, keys
//     lower-cased;
//   - the handler's context ends when the caller's does and when the
//     handler returns; a caller whose context ends gets codes.Canceled or
//     DeadlineExceeded from RecvMsg;
//   - a handler's status error reaches RecvMsg as it is, any other error
//     as codes.Unknown; a clean return is io.EOF after the last response.
//
// Client-streaming and bidirectional methods keep using the fallback
// connection.

type streamMethod struct {
	impl any
	desc grpc.StreamDesc
	// info and handler are composed once per method when the interceptors
	// are known (compose): a call allocates no closures for the chain.
	info    *grpc.StreamServerInfo
	handler grpc.StreamHandler
}

// ServeStreams makes registered server-streaming methods run in place,
// behind the given interceptors (the first one outermost, as
// grpc.ChainStreamInterceptor orders them). Call it before any stream is
// opened.
func (c *Conn) ServeStreams(interceptors ...grpc.StreamServerInterceptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streamsInPlace = true
	c.streamChain = c.streamChain[:0]
	for _, i := range interceptors {
		if i != nil {
			c.streamChain = append(c.streamChain, i)
		}
	}
	for name, m := range c.streams {
		c.streams[name] = c.compose(name, m)
	}
}

// compose builds m's handler behind the stream interceptors (the first
// outermost, as grpc.ChainStreamInterceptor orders them), once: the
// closures of the chain are shared by every call of the method, as the
// method's StreamServerInfo is.
func (c *Conn) compose(name string, m streamMethod) streamMethod {
	info := &grpc.StreamServerInfo{FullMethod: name, IsClientStream: false, IsServerStream: true}
	h := m.desc.Handler
	for i := len(c.streamChain) - 1; i >= 0; i-- {
		interceptor, next := c.streamChain[i], h
		h = func(srv any, ss grpc.ServerStream) error { return interceptor(srv, ss, info, next) }
	}
	m.info, m.handler = info, h
	return m
}

// registerStreams records a service's server-streaming methods.
func (c *Conn) registerStreams(desc *grpc.ServiceDesc, impl any) {
	if c.streams == nil {
		c.streams = make(map[string]streamMethod)
	}
	for _, s := range desc.Streams {
		if s.ServerStreams && !s.ClientStreams {
			name := "/" + desc.ServiceName + "/" + s.StreamName
			c.streams[name] = c.compose(name, streamMethod{impl: impl, desc: s})
		}
	}
}

// localStream returns the in-place method of fullMethod, if streams are
// served in place and it is one.
func (c *Conn) localStream(fullMethod string) (streamMethod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.streamsInPlace {
		return streamMethod{}, false
	}
	m, ok := c.streams[fullMethod]
	return m, ok
}

// call is one stream served in place: the caller's side (clientStream) and
// the handler's (serverStream) share it.
type call struct {
	method string
	opts   []grpc.CallOption

	cctx context.Context // the caller's
	sctx context.Context // the handler's
	stop context.CancelFunc

	req chan proto.Message // the request, once
	// The handoff of each response, one wakeup per response: under mu, a
	// caller waiting in RecvMsg leaves the message to fill in recvInto
	// (the handler fills it, clears it and wakes the caller), and a
	// handler whose caller is not waiting leaves its response in offered
	// (the caller copies it, clears it and wakes the handler). Each wake
	// token is sent under mu into a channel of one, so whoever finds the
	// field cleared under mu after waking for another reason knows the
	// token is there to take.
	recvInto    proto.Message
	offered     proto.Message
	callerWake  chan struct{}
	handlerWake chan struct{}
	done        chan struct{} // closed when the handler returned
	headerc     chan struct{} // closed when the headers are sent

	mu         sync.Mutex
	header     metadata.MD
	trailer    metadata.MD
	headerSent bool
	err        error // the handler's outcome, once done
	sent       bool  // the caller sent its request
	closedSend bool
	finished   bool // RecvMsg returned an error: the call options got their values
	// trailersOnly: the handler failed before sending headers; Header
	// then returns its error, as over the wire.
	trailersOnly bool

	// Both sides live in the call's allocation.
	client  clientStream
	handler handlerStream
}

// newLocalStream starts the handler of m and returns the caller's side.
func (c *Conn) newLocalStream(ctx context.Context, m streamMethod, method string, opts []grpc.CallOption) (grpc.ClientStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	// FromOutgoingContext returns a fresh copy, keys lower-cased: the
	// handler's own metadata, as a connection would deliver it.
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		md = metadata.MD{}
	}
	cl := &call{
		method:      method,
		opts:        opts,
		cctx:        ctx,
		req:         make(chan proto.Message, 1),
		callerWake:  make(chan struct{}, 1),
		handlerWake: make(chan struct{}, 1),
		done:        make(chan struct{}),
		headerc:     make(chan struct{}),
	}
	cl.client.call, cl.handler.call = cl, cl
	sctx, stop := context.WithCancel(metadata.NewIncomingContext(ctx, md))
	cl.sctx, cl.stop = grpc.NewContextWithServerTransportStream(sctx, transportStream{&cl.handler}), stop
	go cl.serve(m)
	return &cl.client, nil
}

// serve runs the handler behind the interceptors and records its outcome.
func (cl *call) serve(m streamMethod) {
	err := m.handler(m.impl, &cl.handler)
	if err != nil {
		if _, isStatus := status.FromError(err); !isStatus {
			err = status.Error(codes.Unknown, err.Error())
		}
	}
	cl.mu.Lock()
	cl.err = err
	cl.trailersOnly = !cl.headerSent && err != nil
	cl.sendHeaderLocked()
	cl.mu.Unlock()
	close(cl.done)
	cl.stop()
}

// sendHeaderLocked marks the headers sent (once).
func (cl *call) sendHeaderLocked() {
	if !cl.headerSent {
		cl.headerSent = true
		close(cl.headerc)
	}
}

// clientStream is the caller's side of a call.
type clientStream struct{ *call }

func (s *clientStream) Context() context.Context { return s.cctx }

// Header waits for the headers (or the end of the call).
func (s *clientStream) Header() (metadata.MD, error) {
	select {
	case <-s.headerc:
	case <-s.cctx.Done():
		return nil, status.FromContextError(s.cctx.Err()).Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trailersOnly {
		return nil, s.err
	}
	return s.header.Copy(), nil
}

// Trailer is valid once RecvMsg returned an error.
func (s *clientStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return s.trailer.Copy()
	default:
		return nil
	}
}

func (s *clientStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closedSend {
		s.closedSend = true
		close(s.req)
	}
	return nil
}

func (s *clientStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "inproc: messages must be protobuf")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closedSend {
		return status.Error(codes.Internal, "SendMsg called after CloseSend")
	}
	if s.sent {
		return status.Error(codes.Internal, "inproc: one request on a server stream")
	}
	s.sent = true
	// The handler owns what it decodes: a copy, made now (the caller may
	// reuse its message once SendMsg returned, as over the wire).
	s.req <- proto.Clone(msg)
	return nil
}

// RecvMsg copies the next response into m; io.EOF after the last one.
func (s *clientStream) RecvMsg(m any) error {
	out, ok := m.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "inproc: messages must be protobuf")
	}
	s.mu.Lock()
	// A response already offered goes before the end of the call.
	if msg := s.offered; msg != nil {
		proto.Reset(out)
		proto.Merge(out, msg)
		s.offered = nil
		s.handlerWake <- struct{}{}
		s.mu.Unlock()
		return nil
	}
	select {
	case <-s.done:
		s.mu.Unlock()
		return s.finish(nil)
	default:
	}
	s.recvInto = out
	s.mu.Unlock()
	var err error
	select {
	case <-s.callerWake:
		return nil // the handler filled out
	case <-s.done:
	case <-s.cctx.Done():
		err = status.FromContextError(s.cctx.Err()).Err()
	}
	s.mu.Lock()
	if s.recvInto == nil {
		// Filled as the call ended: the response goes first.
		<-s.callerWake
		s.mu.Unlock()
		return nil
	}
	s.recvInto = nil
	s.mu.Unlock()
	if err != nil {
		s.stop()
	}
	return s.finish(err)
}

// Ready reports whether RecvMsg would return without waiting: a response
// is offered or the call ended. A relay uses it to write what is already
// there before flushing.
func (s *clientStream) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offered != nil {
		return true
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// finish ends the caller's side: the handler's outcome (io.EOF for a clean
// one) or err, and the call options get the headers and trailers.
func (s *clientStream) finish(err error) error {
	if err == nil {
		s.mu.Lock()
		err = s.err
		s.mu.Unlock()
		if err == nil {
			err = io.EOF
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.finished {
		s.finished = true
		deliverTo(s.opts, s.header, s.trailer)
	}
	return err
}

// handlerStream is the handler's side of a call (also its
// grpc.ServerTransportStream, for grpc.SetHeader and friends).
type handlerStream struct {
	*call
	recvd bool
}

func (s *handlerStream) Method() string           { return s.method }
func (s *handlerStream) Context() context.Context { return s.sctx }

func (s *handlerStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headerSent {
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	s.header = join(s.header, md)
	return nil
}

func (s *handlerStream) SendHeader(md metadata.MD) error {
	if err := s.SetHeader(md); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendHeaderLocked()
	return nil
}

func (s *handlerStream) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = join(s.trailer, md)
}

// transportStream adapts SetTrailer to grpc.ServerTransportStream's
// signature (which returns an error).
type transportStream struct{ *handlerStream }

func (t transportStream) SetTrailer(md metadata.MD) error {
	t.handlerStream.SetTrailer(md)
	return nil
}

// SendMsg hands m to the caller and returns once the caller has its copy:
// made here when the caller is waiting, else by the caller when it comes.
func (s *handlerStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "inproc: messages must be protobuf")
	}
	s.mu.Lock()
	s.sendHeaderLocked()
	if out := s.recvInto; out != nil {
		proto.Reset(out)
		proto.Merge(out, msg)
		s.recvInto = nil
		s.callerWake <- struct{}{}
		s.mu.Unlock()
		return nil
	}
	if err := s.sctx.Err(); err != nil {
		s.mu.Unlock()
		return status.FromContextError(err).Err()
	}
	s.offered = msg
	s.mu.Unlock()
	select {
	case <-s.handlerWake:
		return nil // the caller copied it
	case <-s.sctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offered == nil {
		// The caller took it as the call ended: it has its copy.
		<-s.handlerWake
		return nil
	}
	s.offered = nil
	return status.FromContextError(s.sctx.Err()).Err()
}

// RecvMsg gives the handler its copy of the request.
func (s *handlerStream) RecvMsg(m any) error {
	out, ok := m.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "inproc: messages must be protobuf")
	}
	if s.recvd {
		return io.EOF
	}
	select {
	case msg, ok := <-s.req:
		if !ok {
			return status.Error(codes.Internal, "inproc: the caller closed the stream without a request")
		}
		s.recvd = true
		proto.Reset(out)
		proto.Merge(out, msg)
		return nil
	case <-s.sctx.Done():
		return status.FromContextError(s.sctx.Err()).Err()
	}
}

// deliverTo hands headers and trailers to the caller's call options.
func deliverTo(opts []grpc.CallOption, header, trailer metadata.MD) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = header.Copy()
		case *grpc.HeaderCallOption:
			*o.HeaderAddr = header.Copy()
		case grpc.TrailerCallOption:
			*o.TrailerAddr = trailer.Copy()
		case *grpc.TrailerCallOption:
			*o.TrailerAddr = trailer.Copy()
		}
	}
}
