// Package model holds the GraphQL types of the billing surface: those gqlgen
// generates (models_gen.go) and the hand-written ones.
package model

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// UserType is the signed-in user; subscription and invoices are resolved
// per field.
type UserType struct {
	ID    string  `json:"id"`
	Email *string `json:"email,omitempty"`
}

// MarshalDateTime writes a DateTime as an RFC 3339 string in UTC.
func MarshalDateTime(t time.Time) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, strconv.Quote(t.UTC().Format(time.RFC3339)))
	})
}

// UnmarshalDateTime reads an RFC 3339 string.
func UnmarshalDateTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, fmt.Errorf("DateTime must be an RFC 3339 string")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("DateTime must be an RFC 3339 string: %w", err)
	}
	return t, nil
}
