package userauth

import (
	"context"

	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/internal/rpcauth"
)

// Vouching wraps the connection to billing so that every call names the
// request's signed-in user (FromContext) in the metadata billing trusts
// from the edge alone, and names nobody when no user signed in. Whatever
// user a request body names, billing acts for this one.
func Vouching(conn grpc.ClientConnInterface) grpc.ClientConnInterface {
	return vouching{conn}
}

type vouching struct{ conn grpc.ClientConnInterface }

func vouch(ctx context.Context) context.Context {
	u, err := FromContext(ctx)
	if err != nil {
		u = User{}
	}
	return rpcauth.VouchUser(ctx, rpcauth.User{ID: u.ID, Email: u.Email})
}

func (v vouching) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return v.conn.Invoke(vouch(ctx), method, args, reply, opts...)
}

func (v vouching) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return v.conn.NewStream(vouch(ctx), desc, method, opts...)
}
