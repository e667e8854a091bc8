// Package rpcauth authenticates the gRPC calls between switchboard's roles.
//
// Every role holds one shared service credential, the internal token
// (SWITCHBOARD_INTERNAL_TOKEN; `serve` generates one into its data
// directory). Dialers send it as per-RPC metadata (MDInternalToken) and a
// server's Guard checks it in constant time before any handler runs, on the
// network listener and on the in-process path alike. Services that
// authenticate their own callers (core's Router by API key, core's Admin by
// the admin token, health checks) are listed as such and pass the Guard
// untouched; every other method, reflection included, needs the credential,
// so a service added later is closed until someone opens it.
//
// A caller holding the credential may vouch for a signed-in user with
// VouchUser; the called service reads that user with VouchedUser, which
// answers only for calls the Guard admitted. Optional TLS (and client
// certificates) protects the credential in transit between machines; see
// tls.go.
package rpcauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// MinTokenLen is the shortest internal token accepted.
const MinTokenLen = 16

// Errors of the Guard and of VouchedUser.
var (
	// ErrNoCredential: the call carries no valid internal token.
	ErrNoCredential = errors.New("rpcauth: a valid internal service credential is required")
	// ErrNoUser: no user was vouched for by an admitted caller.
	ErrNoUser = errors.New("rpcauth: no vouched user")
)

// reflectionServices are the gRPC reflection services (v1 and v1alpha).
var reflectionServices = []string{"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Token is the internal token. Empty admits no caller to guarded
	// methods.
	Token string
	// SelfAuthenticated names services (e.g. "switchboard.core.v1.Router")
	// whose handlers authenticate their own callers; the Guard lets their
	// calls through without the internal token.
	SelfAuthenticated []string
	// OpenReflection lets anyone use server reflection (set when the
	// listener binds loopback only); otherwise it needs the internal token.
	OpenReflection bool
}

// Guard is a server interceptor pair admitting only callers that prove they
// are a role, except on self-authenticated services.
type Guard struct {
	token []byte
	open  map[string]bool
}

// NewGuard returns a Guard.
func NewGuard(cfg GuardConfig) *Guard {
	g := &Guard{open: make(map[string]bool)}
	if cfg.Token != "" {
		g.token = []byte(cfg.Token)
	}
	for _, s := range cfg.SelfAuthenticated {
		g.open[s] = true
	}
	if cfg.OpenReflection {
		for _, s := range reflectionServices {
			g.open[s] = true
		}
	}
	return g
}

type roleKey struct{}

// admit checks a call to fullMethod ("/pkg.Service/Method") and returns the
// context handlers see: marked as a role's call when the credential is
// valid.
func (g *Guard) admit(ctx context.Context, fullMethod string) (context.Context, error) {
	if g.valid(ctx) {
		return context.WithValue(ctx, roleKey{}, true), nil
	}
	if g.open[serviceOf(fullMethod)] {
		return ctx, nil
	}
	return nil, status.Error(codes.Unauthenticated, ErrNoCredential.Error())
}

// valid reports whether ctx carries exactly one internal token, equal to
// the Guard's.
func (g *Guard) valid(ctx context.Context) bool {
	// One key read, not a copy of the whole metadata.
	return g.validToken(metadata.ValueFromIncomingContext(ctx, contract.MDInternalToken))
}

func (g *Guard) validToken(v []string) bool {
	if g.token == nil || len(v) != 1 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(v[0]), g.token) == 1
}

// Tap is the Guard as a gRPC server tap (grpc.InTapHandle): it runs when a
// call's headers arrive, before the server reads its request message (the
// interceptors run only once the message is read and decoded), and refuses
// a call to a guarded service that carries no valid internal token, so a
// caller without it never makes the server read its message. The
// interceptors check the call again.
func (g *Guard) Tap() tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if g.open[serviceOf(info.FullMethodName)] || g.validToken(info.Header.Get(contract.MDInternalToken)) {
			return ctx, nil
		}
		return nil, status.Error(codes.Unauthenticated, ErrNoCredential.Error())
	}
}

func serviceOf(fullMethod string) string {
	s := strings.TrimPrefix(fullMethod, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}

// Unary is the Guard as a unary server interceptor.
func (g *Guard) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := g.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream is the Guard as a stream server interceptor.
func (g *Guard) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		if g.valid(ctx) {
			// The stream and its role-marked context in one allocation.
			s := &stream{ServerStream: ss}
			s.ctx.Context = ctx
			return handler(srv, s)
		}
		if _, err := g.admit(ctx, info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// stream is a stream whose context is marked as a role's call.
type stream struct {
	grpc.ServerStream
	ctx roleContext
}

func (s *stream) Context() context.Context { return &s.ctx }

// roleContext is its parent marked as a role's call: what
// context.WithValue(parent, roleKey{}, true) gives, held by value.
type roleContext struct{ context.Context }

func (c *roleContext) Value(key any) any {
	if _, ok := key.(roleKey); ok {
		return true
	}
	return c.Context.Value(key)
}

// FromRole reports whether the Guard admitted ctx's call with the internal
// token.
func FromRole(ctx context.Context) bool {
	ok, _ := ctx.Value(roleKey{}).(bool)
	return ok
}

// User is a signed-in user a role vouches for.
type User struct {
	ID    string
	Email string
}

// VouchUser returns ctx whose outgoing metadata names u as the user of the
// call, replacing any user named before; with an empty u.ID it removes the
// user. Values are percent-encoded (metadata must be printable ASCII).
func VouchUser(ctx context.Context, u User) context.Context {
	md := outgoing(ctx)
	md.Delete(contract.MDUserID)
	md.Delete(contract.MDUserEmail)
	if u.ID != "" {
		md.Set(contract.MDUserID, url.PathEscape(u.ID))
		if u.Email != "" {
			md.Set(contract.MDUserEmail, url.PathEscape(u.Email))
		}
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// VouchedUser is the user a role vouched for on ctx's call. It is ErrNoUser
// unless the Guard admitted the call with the internal token and exactly one
// well-formed user id came with it.
func VouchedUser(ctx context.Context) (User, error) {
	if !FromRole(ctx) {
		return User{}, ErrNoUser
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ids := md.Get(contract.MDUserID)
	if len(ids) != 1 {
		return User{}, ErrNoUser
	}
	id, err := url.PathUnescape(ids[0])
	if err != nil || id == "" {
		return User{}, ErrNoUser
	}
	u := User{ID: id}
	if emails := md.Get(contract.MDUserEmail); len(emails) == 1 {
		if e, err := url.PathUnescape(emails[0]); err == nil {
			u.Email = e
		}
	}
	return u, nil
}

// VouchAdmin returns ctx whose outgoing metadata says the caller presented
// the admin token to the edge, and names no user: an operator's call is
// never made on behalf of a signed-in user.
func VouchAdmin(ctx context.Context) context.Context {
	md := outgoing(ctx)
	md.Delete(contract.MDUserID)
	md.Delete(contract.MDUserEmail)
	md.Set(contract.MDAdmin, "1")
	return metadata.NewOutgoingContext(ctx, md)
}

// outgoing is a copy of ctx's outgoing metadata to change (never nil):
// FromOutgoingContext builds a new MD on every call, so it is copied once.
func outgoing(ctx context.Context) metadata.MD {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		return metadata.MD{}
	}
	return md
}

// ErrNotAdmin: the call is not an operator's (VouchedAdmin).
var ErrNotAdmin = errors.New("rpcauth: an operator's call is required")

// VouchedAdmin reports whether ctx's call is an operator's: the Guard
// admitted it with the internal token, exactly one MDAdmin "1" came with
// it, and no user was named (not even an ill-formed one).
func VouchedAdmin(ctx context.Context) error {
	if !FromRole(ctx) {
		return ErrNotAdmin
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(contract.MDUserID)) != 0 || len(md.Get(contract.MDUserEmail)) != 0 {
		return ErrNotAdmin
	}
	if v := md.Get(contract.MDAdmin); len(v) != 1 || v[0] != "1" {
		return ErrNotAdmin
	}
	return nil
}

// TokenCredentials returns per-RPC credentials sending the internal token on
// every call of a connection. They are sent on plaintext connections too:
// a private network is the deployment's choice, and TLS (ServerTLS,
// ClientTLS) is how the token is kept from a network that is not.
func TokenCredentials(token string) credentials.PerRPCCredentials {
	return tokenCreds(token)
}

type tokenCreds string

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{contract.MDInternalToken: string(t)}, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return false }

// WithToken wraps a connection so that every call carries the internal
// token in its outgoing metadata: for connections that are not dialed, such
// as the in-process one (internal/inproc), whose calls pass the same Guard.
func WithToken(conn grpc.ClientConnInterface, token string) grpc.ClientConnInterface {
	return WithContext(conn, func(ctx context.Context) context.Context {
		md := outgoing(ctx)
		md.Set(contract.MDInternalToken, token)
		return metadata.NewOutgoingContext(ctx, md)
	})
}

// WithContext wraps a connection so that every call, unary or streaming,
// runs with f applied to its context: how the token, a vouched user and a
// trace's propagation ride on a connection.
func WithContext(conn grpc.ClientConnInterface, f func(context.Context) context.Context) grpc.ClientConnInterface {
	return ctxConn{conn: conn, f: f}
}

type ctxConn struct {
	conn grpc.ClientConnInterface
	f    func(context.Context) context.Context
}

func (c ctxConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.conn.Invoke(c.f(ctx), method, args, reply, opts...)
}

func (c ctxConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.conn.NewStream(c.f(ctx), desc, method, opts...)
}
