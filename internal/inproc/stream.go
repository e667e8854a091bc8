package inproc

import (
	"context"
	"errors"
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

// Deliver is a call option for a server stream served in place: the
// handler then runs on the caller's own goroutine, within the call's first
// RecvMsg, and hands each response to fn as it sends it, as it is: no
// goroutine, no copy, no wakeup per response. fn must be done with a
// response when it returns (the handler may reuse it, as after a SendMsg
// over the wire); an error from fn ends the call (the handler's SendMsg
// returns it as codes.Canceled, as for a client that went away). That
// first RecvMsg returns the stream's end: io.EOF after a clean one, else
// the status. Header may be called from fn (headers are sent before the
// first response at the latest). The request is read when the handler
// runs: the caller leaves it unchanged until then.
//
// On any other connection the option does nothing (it embeds
// grpc.EmptyCallOption) and RecvMsg returns the responses: a caller hands
// each response RecvMsg returns to fn too, and handles both the same way.
func Deliver(fn func(proto.Message) error) grpc.CallOption { return deliverOption{fn: fn} }

type deliverOption struct {
	grpc.EmptyCallOption
	fn func(proto.Message) error
}

// deliverFn is the Deliver option's function among opts, or nil.
func deliverFn(opts []grpc.CallOption) func(proto.Message) error {
	for _, o := range opts {
		if d, ok := o.(deliverOption); ok {
			return d.fn
		}
	}
	return nil
}

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
//
// Each handoff wakes the other side once. Under mu a side that must wait
// sets what it waits for (the caller: recvInto, the message to fill; the
// handler: reqWaiting, or offered, its response for the caller to copy)
// and then waits on its wake channel (capacity one). Whoever ends that
// wait clears the field and sends one token, still under mu; so a side
// that woke for another reason (its context ended) and finds the field
// cleared under mu knows the token is there and takes it.
type call struct {
	method string
	opts   []grpc.CallOption

	cctx context.Context // the caller's
	sctx context.Context // the handler's
	stop context.CancelFunc

	callerWake  chan struct{}
	handlerWake chan struct{}

	mu         sync.Mutex
	request    proto.Message // the caller's request (a copy) until the handler takes it
	reqWaiting bool          // the handler waits for the request
	recvInto   proto.Message // the caller waits in RecvMsg for this to be filled
	filled     bool          // the handler filled recvInto
	offered    proto.Message // the handler waits for the caller to copy this
	ended      bool          // the handler returned; err is its outcome
	// headerc is made by a Header that has to wait, and closed when the
	// headers are sent.
	headerc    chan struct{}
	header     metadata.MD
	trailer    metadata.MD
	headerSent bool
	err        error
	sent       bool // the caller sent its request
	closedSend bool
	finished   bool // RecvMsg returned an error: the call options got their values
	// trailersOnly: the handler failed before sending headers; Header
	// then returns its error, as over the wire.
	trailersOnly bool

	// deliver is the Deliver option's function: the handler runs in the
	// caller's first RecvMsg (pending until then) and sends to it.
	deliver func(proto.Message) error
	pending *streamMethod
	// deliverPanic is what deliver panicked with (callDeliver).
	deliverPanic *any

	// Both sides live in the call's allocation.
	client  clientStream
	handler handlerStream
}

// newLocalStream starts the handler of m and returns the caller's side.
func (c *Conn) newLocalStream(ctx context.Context, m streamMethod, method string, set *pair, opts []grpc.CallOption) (grpc.ClientStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	md := incoming(ctx, set)
	cl := &call{
		method:      method,
		opts:        opts,
		cctx:        ctx,
		callerWake:  make(chan struct{}, 1),
		handlerWake: make(chan struct{}, 1),
	}
	cl.client.call, cl.handler.call = cl, cl
	sctx, stop := context.WithCancel(metadata.NewIncomingContext(ctx, md))
	cl.sctx, cl.stop = grpc.NewContextWithServerTransportStream(sctx, transportStream{&cl.handler}), stop
	if cl.deliver = deliverFn(opts); cl.deliver != nil {
		cl.pending = &m
		return &cl.client, nil
	}
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
	cl.ended = true
	cl.trailersOnly = !cl.headerSent && err != nil
	cl.sendHeaderLocked()
	if cl.recvInto != nil {
		cl.recvInto = nil
		cl.callerWake <- struct{}{}
	}
	cl.mu.Unlock()
	cl.stop()
}

// sendHeaderLocked marks the headers sent (once).
func (cl *call) sendHeaderLocked() {
	if !cl.headerSent {
		cl.headerSent = true
		if cl.headerc != nil {
			close(cl.headerc)
		}
	}
}

// clientStream is the caller's side of a call.
type clientStream struct{ *call }

func (s *clientStream) Context() context.Context { return s.cctx }

// Header waits for the headers (or the end of the call). A Deliver call's
// handler runs now if no RecvMsg ran it yet.
func (s *clientStream) Header() (metadata.MD, error) {
	if s.deliver != nil && s.pending != nil {
		_ = s.serveHere()
	}
	s.mu.Lock()
	if !s.headerSent {
		if s.headerc == nil {
			s.headerc = make(chan struct{})
		}
		c := s.headerc
		s.mu.Unlock()
		select {
		case <-c:
		case <-s.cctx.Done():
			return nil, status.FromContextError(s.cctx.Err()).Err()
		}
		s.mu.Lock()
	}
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
	if !s.ended {
		return nil
	}
	return s.trailer.Copy()
}

func (s *clientStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closedSend {
		s.closedSend = true
		s.wakeHandlerForRequestLocked()
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
	if s.deliver != nil {
		// The handler runs in the caller's RecvMsg and copies the request
		// as it decodes it (Deliver: left unchanged until then).
		s.request = msg
		return nil
	}
	// The handler owns what it decodes: a copy, made now (the caller may
	// reuse its message once SendMsg returned, as over the wire).
	s.request = proto.Clone(msg)
	s.wakeHandlerForRequestLocked()
	return nil
}

// wakeHandlerForRequestLocked ends the handler's wait for the request, if
// it waits.
func (s *clientStream) wakeHandlerForRequestLocked() {
	if s.reqWaiting {
		s.reqWaiting = false
		s.handlerWake <- struct{}{}
	}
}

// RecvMsg copies the next response into m; io.EOF after the last one.
func (s *clientStream) RecvMsg(m any) error {
	out, ok := m.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "inproc: messages must be protobuf")
	}
	if s.deliver != nil {
		return s.serveHere()
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
	// A caller whose context ended gets its context's error, as over
	// gRPC, even if the handler ended too (it sees the same context).
	if err := s.cctx.Err(); err != nil {
		s.mu.Unlock()
		s.stop()
		return s.finish(status.FromContextError(err).Err())
	}
	if s.ended {
		s.mu.Unlock()
		return s.finish(nil)
	}
	s.recvInto = out
	s.mu.Unlock()
	var ctxErr error
	select {
	case <-s.callerWake:
	case <-s.cctx.Done():
		ctxErr = status.FromContextError(s.cctx.Err()).Err()
	}
	s.mu.Lock()
	if ctxErr != nil {
		if s.recvInto == nil {
			<-s.callerWake // ended by the handler meanwhile: its token
		} else {
			s.recvInto = nil
		}
	}
	filled, ended := s.filled, s.ended
	s.filled = false
	s.mu.Unlock()
	if filled {
		return nil
	}
	if err := s.cctx.Err(); err != nil {
		s.stop()
		return s.finish(status.FromContextError(err).Err())
	}
	if ended {
		return s.finish(nil)
	}
	s.stop()
	return s.finish(ctxErr)
}

// serveHere runs a Deliver call's handler on the caller's goroutine (once:
// a later RecvMsg returns the same end) and returns the stream's end.
func (s *clientStream) serveHere() error {
	if m := s.pending; m != nil {
		s.pending = nil
		if err := s.cctx.Err(); err == nil {
			s.serve(*m)
		} else {
			s.stop()
		}
		if p := s.deliverPanic; p != nil {
			panic(*p) // the caller's own, raised where it would have been
		}
	}
	if err := s.cctx.Err(); err != nil {
		return s.finish(status.FromContextError(err).Err())
	}
	return s.finish(nil)
}

// finish ends the caller's side: the handler's outcome (io.EOF for a clean
// one) or err, and the call options get the headers and trailers.
func (s *clientStream) finish(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = s.err
		if err == nil {
			err = io.EOF
		}
	}
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
	if s.deliver != nil {
		return s.deliverMsg(msg)
	}
	s.mu.Lock()
	s.sendHeaderLocked()
	if out := s.recvInto; out != nil {
		proto.Reset(out)
		proto.Merge(out, msg)
		s.recvInto, s.filled = nil, true
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

// deliverMsg hands msg to a Deliver call's function, on the caller's
// goroutine (the handler runs there).
func (s *handlerStream) deliverMsg(msg proto.Message) error {
	s.mu.Lock()
	s.sendHeaderLocked()
	s.mu.Unlock()
	if err := s.sctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if err := s.callDeliver(msg); err != nil {
		// The caller stopped taking responses, as a client that went away:
		// what the handler started ends with it.
		s.stop()
		if _, isStatus := status.FromError(err); isStatus {
			return err
		}
		return status.Error(codes.Canceled, err.Error())
	}
	return nil
}

// callDeliver runs the Deliver function. A panic there is the caller's,
// not the handler's: it is kept (the handler sees an error and ends, and
// no interceptor of the handler's takes it for its own) and raised again
// on the caller's side once the handler returned (serveHere).
func (cl *call) callDeliver(msg proto.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			cl.deliverPanic = &p
			err = errCallerPanicked
		}
	}()
	return cl.deliver(msg)
}

// errCallerPanicked is what the handler's SendMsg returns when the Deliver
// function panicked.
var errCallerPanicked = errors.New("inproc: the caller panicked taking a response")

// RecvMsg gives the handler its copy of the request.
func (s *handlerStream) RecvMsg(m any) error {
	out, ok := m.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "inproc: messages must be protobuf")
	}
	if s.recvd {
		return io.EOF
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if msg := s.request; msg != nil {
			s.request, s.recvd = nil, true
			proto.Reset(out)
			proto.Merge(out, msg)
			return nil
		}
		if s.closedSend {
			return status.Error(codes.Internal, "inproc: the caller closed the stream without a request")
		}
		if err := s.sctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		s.reqWaiting = true
		s.mu.Unlock()
		var done bool
		select {
		case <-s.handlerWake:
		case <-s.sctx.Done():
			done = true
		}
		s.mu.Lock()
		if done {
			if s.reqWaiting {
				s.reqWaiting = false
				return status.FromContextError(s.sctx.Err()).Err()
			}
			<-s.handlerWake // the caller's token, sent as the context ended
		}
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
