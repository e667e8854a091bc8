package graphql

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/playground"
	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/edge/internal/graphql/exec"
	"github.com/switchboardhq/switchboard/edge/internal/userauth"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// MaxBodyBytes caps a GraphQL request body.
const MaxBodyBytes = 1 << 20

// callTimeout bounds one GraphQL request's calls to billing.
const callTimeout = 30 * time.Second

// NewHandler returns the POST /graphql handler: users authenticated by
// verifier, fields resolved through billing's gRPC service on conn.
func NewHandler(conn grpc.ClientConnInterface, verifier *userauth.Verifier, log *slog.Logger) http.Handler {
	return NewHandlerWith(conn, verifier, log, Options{})
}

// NewHandlerWith is NewHandler with options. Transport errors (a body too
// large, not JSON, a batch, nested too deep) are refused before GraphQL runs
// with their own codes; operations are bounded in complexity (so in
// aliases), tokens and mutations (MaxMutations); introspection and the
// validation errors' suggestions are for callers who may introspect.
func NewHandlerWith(conn grpc.ClientConnInterface, verifier *userauth.Verifier, log *slog.Logger, opts Options) http.Handler {
	// Billing acts for the user the edge vouches for on the connection, not
	// for the user a request body names.
	srv := handler.New(exec.NewExecutableSchema(exec.Config{Resolvers: &Resolver{billing: billingv1.NewBillingClient(userauth.Vouching(conn))}}))
	srv.AddTransport(transport.POST{})
	srv.Use(introspectionGate{open: opts.OpenIntrospection})
	srv.Use(mutationLimit{})
	srv.Use(extension.FixedComplexityLimit(MaxComplexity))
	srv.SetParserTokenLimit(MaxTokens)
	srv.SetErrorPresenter(errorPresenter(log, opts.OpenIntrospection))
	srv.SetRecoverFunc(recoverFunc(log))
	return verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !checkTransport(w, r, opts, log) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
		defer cancel()
		if key := r.Header.Get("Idempotency-Key"); key != "" {
			ctx = context.WithValue(ctx, idempotencyKeyCtx{}, key)
		}
		srv.ServeHTTP(w, r.WithContext(ctx))
	}))
}

// Playground returns the GraphiQL page for GET /graphql, posting to path.
func Playground(path string) http.Handler {
	return playground.Handler("Switchboard billing", path)
}
