package graphql

import (
	"context"
	"strings"

	gql "github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Rules an operation must keep beyond GraphQL's validation, checked once
// it is parsed and validated and before any field runs: a refused
// operation runs nothing.

// MaxMutations bounds the mutation fields an operation runs. Each mutation
// calls Stripe several times, and aliases would turn one request into
// hundreds of calls on the account's shared rate limit: a frontend sends
// one mutation per request.
const MaxMutations = 1

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
