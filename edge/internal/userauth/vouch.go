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
	return rpcauth.WithContext(conn, vouch)
}

func vouch(ctx context.Context) context.Context {
	u, err := FromContext(ctx)
	if err != nil {
		u = User{}
	}
	return rpcauth.VouchUser(ctx, rpcauth.User{ID: u.ID, Email: u.Email})
}
