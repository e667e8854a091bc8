package graphql

import (
	"context"
	"errors"
	"strings"

	gql "github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchboardhq/switchboard/edge/internal/userauth"
)

// Rules an operation must keep beyond GraphQL's validation, checked once
// it is parsed and validated and before any field runs: a refused
// operation runs nothing.

// MaxMutations bounds the mutation fields an operation runs. Each mutation
// calls Stripe several times, and aliases would turn one request into
// hundreds of calls on the account's shared rate limit: a frontend sends
// one mutation per request.
const MaxMutations = 1

// mayIntrospect reports whether the request's caller may introspect the
// schema: anyone when open (a loopback listener), else a signed-in user.
func mayIntrospect(ctx context.Context, open bool) bool {
	if open {
		return true
	}
	_, err := userauth.FromContext(ctx)
	return err == nil
}

// introspectionGate refuses an operation that introspects the schema
// (__schema, __type) when its caller may not, with the error a field that
// needs a user answers (UNAUTHENTICATED: signing in opens it), before
// anything runs.
type introspectionGate struct{ open bool }

var _ interface {
	gql.HandlerExtension
	gql.OperationContextMutator
} = introspectionGate{}

func (introspectionGate) ExtensionName() string               { return "IntrospectionGate" }
func (introspectionGate) Validate(gql.ExecutableSchema) error { return nil }

func (g introspectionGate) MutateOperationContext(ctx context.Context, rc *gql.OperationContext) *gqlerror.Error {
	if mayIntrospect(ctx, g.open) {
		rc.DisableIntrospection = false
		return nil
	}
	rc.DisableIntrospection = true
	if rc.Operation.Operation != ast.Query {
		return nil // __schema and __type are fields of Query alone
	}
	for _, f := range gql.CollectFields(rc, rc.Operation.SelectionSet, []string{"Query"}) {
		if f.Name != "__schema" && f.Name != "__type" {
			continue
		}
		_, cause := userauth.FromContext(ctx)
		e := notSignedIn(cause)
		msg := e.Message
		if errors.Is(cause, userauth.ErrNoToken) {
			msg = "You must sign in first to introspect the schema."
		}
		return &gqlerror.Error{
			Message:    msg,
			Locations:  []gqlerror.Location{{Line: f.Position.Line, Column: f.Position.Column}},
			Extensions: map[string]any{"code": e.Code, "status": e.Status},
		}
	}
	return nil
}

// mutationLimit refuses an operation of more than MaxMutations mutation
// fields (counted after aliases, fragments, @skip and @include; __typename
// is free) as an invalid one.
type mutationLimit struct{}

var _ interface {
	gql.HandlerExtension
	gql.OperationContextMutator
} = mutationLimit{}

func (mutationLimit) ExtensionName() string               { return "MutationLimit" }
func (mutationLimit) Validate(gql.ExecutableSchema) error { return nil }

func (mutationLimit) MutateOperationContext(_ context.Context, rc *gql.OperationContext) *gqlerror.Error {
	if rc.Operation.Operation != ast.Mutation {
		return nil
	}
	n := 0
	for _, f := range gql.CollectFields(rc, rc.Operation.SelectionSet, []string{"Mutation"}) {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		if n++; n > MaxMutations {
			err := gqlerror.ErrorPosf(f.Position, "An operation may run only one mutation: send each mutation (%q here) in a request of its own.", f.Alias)
			errcode.Set(err, errcode.ValidationFailed)
			return err
		}
	}
	return nil
}

// withoutSuggestions is a validation error's message without the "Did you
// mean ...?" suggestions GraphQL's validation appends (they name the
// schema's fields, arguments, types and enum values).
func withoutSuggestions(msg string) string {
	if i := strings.Index(msg, " Did you mean "); i >= 0 {
		return msg[:i]
	}
	return msg
}
