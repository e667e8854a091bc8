package grpcapi

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/requestid"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// RequestIDUnary and RequestIDStream tell a network caller of Router the id
// its request is logged under, as the HTTP routes' X-Request-Id does: the
// one it sent (sanitised), or one made for it, in the response header
// x-request-id. They run on core's network server only: the edge in the
// same process names every request itself.
func RequestIDUnary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if isRouter(info.FullMethod) {
			ctx = withRequestID(ctx, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
		}
		return handler(ctx, req)
	}
}

// RequestIDStream is RequestIDUnary for streamed calls.
func RequestIDStream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !isRouter(info.FullMethod) {
			return handler(srv, ss)
		}
		return handler(srv, idStream{ServerStream: ss, ctx: withRequestID(ss.Context(), ss.SetHeader)})
	}
}

func isRouter(method string) bool {
	return strings.HasPrefix(method, "/"+corev1.Router_ServiceDesc.ServiceName+"/")
}

// withRequestID sends the request's id as a header and answers a context
// whose metadata holds it, for the usage event to carry.
func withRequestID(ctx context.Context, setHeader func(metadata.MD) error) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	var sent string
	if v := md.Get(MDRequestID); len(v) > 0 {
		sent = v[0]
	}
	id := requestid.From(sent)
	_ = setHeader(metadata.Pairs(MDRequestID, id))
	if id == sent {
		return ctx
	}
	md = md.Copy()
	md.Set(MDRequestID, id)
	return metadata.NewIncomingContext(ctx, md)
}

type idStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s idStream) Context() context.Context { return s.ctx }
