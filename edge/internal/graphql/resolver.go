// Package graphql is the edge's GraphQL billing surface (gqlgen,
// schema-first: schema.graphqls, gqlgen.yml; run `go tool gqlgen` in this
// folder). Resolvers only translate: every field calls billing's gRPC
// service for the signed-in user, and gRPC errors become GraphQL errors with
// `extensions { code, status }`.
package graphql

import (
	"context"

	"github.com/switchboardhq/switchboard/edge/internal/userauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// Resolver is the root resolver.
type Resolver struct {
	billing billingv1.BillingClient
}

// signedIn returns the request's user as billing's User, or UNAUTHENTICATED
// (AUTH_UNAVAILABLE when the token could not be checked).
func signedIn(ctx context.Context) (*billingv1.User, error) {
	u, err := userauth.FromContext(ctx)
	if err != nil {
		return nil, notSignedIn(err)
	}
	return &billingv1.User{Id: u.ID, Email: u.Email}, nil
}

type idempotencyKeyCtx struct{}

// idempotencyKeyOf is the mutation's idempotencyKey argument, else the
// request's Idempotency-Key header.
func idempotencyKeyOf(ctx context.Context, arg *string) string {
	if arg != nil && *arg != "" {
		return *arg
	}
	s, _ := ctx.Value(idempotencyKeyCtx{}).(string)
	return s
}
