package grpcapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
)

// Bounds on what the admin API stores, far beyond any real setup. Each
// stored value is one NATS message (1 MiB unless the server's max_payload
// says otherwise); at these bounds the largest, a machine's settings with
// its aliases and combos, stays under half of that. A value that is too
// large all the same answers 413 (storeError).
const (
	// maxNameLen bounds a connection's, API key's or machine's name, in
	// characters.
	maxNameLen = 200
	// maxModelIDLen bounds a disabled or enabled model id and a provider
	// alias, in characters, as modelNamePattern bounds alias and combo
	// names and their models.
	maxModelIDLen = 200
	// maxAliases bounds a machine's model aliases.
	maxAliases = 500
	// maxCombos bounds a machine's combos, maxComboModels each one's models.
	maxCombos      = 50
	maxComboModels = 20
	// maxDisabledModels bounds a machine's disabled models, all provider
	// aliases together.
	maxDisabledModels = 1000
	// maxEnabledModels bounds a connection's enabled models.
	maxEnabledModels = 1000
)

// validName checks a required name against maxNameLen.
func validName(param, name string) error {
	if name == "" {
		return missingParam(param)
	}
	return nameLength(param, name)
}

// nameLength checks a name against maxNameLen.
func nameLength(param, name string) error {
	if utf8.RuneCountInString(name) > maxNameLen {
		return invalidParam(param, "invalid_value", fmt.Sprintf("'%s' must be at most %d characters", param, maxNameLen))
	}
	return nil
}

// tooMany is the error of a list past its bound.
func tooMany(param string, limit int, what string) error {
	return invalidParam(param, "invalid_value", fmt.Sprintf("at most %d %s", limit, what))
}

// validModelIDs checks a list of model ids a request sets: at most limit,
// none empty or longer than maxModelIDLen.
func validModelIDs(param string, ids []string, limit int, what string) error {
	if len(ids) > limit {
		return tooMany(param, limit, what)
	}
	for _, id := range ids {
		if id == "" {
			return invalidParam(param, "invalid_value", fmt.Sprintf("'%s' must not hold empty ids", param))
		}
		if utf8.RuneCountInString(id) > maxModelIDLen {
			return invalidParam(param, "invalid_value", fmt.Sprintf("'%s' holds an id longer than %d characters", param, maxModelIDLen))
		}
	}
	return nil
}

// valueTooLarge reports a write the state store refused for its size: the
// value is larger than a NATS message (the client's check) or than the
// stream takes. Trying again cannot help.
func valueTooLarge(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum)
}

// tooLarge is the 413 of a value the state store cannot hold.
func tooLarge() error {
	return statusError(codes.InvalidArgument, "request_too_large", "the value to store is larger than the state store takes",
		MetaHTTPStatus, strconv.Itoa(http.StatusRequestEntityTooLarge))
}
