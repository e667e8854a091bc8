package grpcapi

import (
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/switchboardhq/switchboard/core/internal/routing"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// prefixTaken refuses a model prefix that names another provider's models.
func prefixTaken(param, msg string) error {
	return statusError(codes.AlreadyExists, "prefix_taken", msg, MetaParam, param)
}

// freePrefix refuses a connection whose models would go under a name that
// already names another provider's: a prefix that is a registry provider's
// id or alias (its own provider's and unreserved ones aside), or a prefix that is the prefix or
// provider id of a connection of another provider of the machine. Routing
// would send the models of both to whichever comes first by priority.
// Connections of one provider share their prefix: that is how a second key
// serves the same models. withProvider checks the connection's provider id
// too, which names its models whatever its prefix (a new connection; an
// update checks only the prefix it sets). Connections stored before the
// check keep their prefixes.
func (a *Admin) freePrefix(c *busv1.Connection, spec provider.Spec, withProvider bool) error {
	prefix := c.GetData().GetPrefix()
	if prefix != "" && prefix != spec.ID && prefix != spec.Alias {
		for _, id := range a.registry.IDs() {
			if s, _ := a.registry.Lookup(id); !s.Unreserved && (prefix == s.ID || prefix == s.Alias) {
				return prefixTaken("providerSpecificData.prefix",
					fmt.Sprintf("prefix '%s' is the model prefix of provider '%s'; choose another prefix", prefix, s.ID))
			}
		}
	}
	own := routing.Prefix(c, spec)
	for _, o := range a.store.MachineConnections(c.GetMachineId()) {
		if o.GetProvider() == c.GetProvider() {
			continue
		}
		oSpec, ok := a.registry.Lookup(o.GetProvider())
		if !ok {
			continue
		}
		theirs := routing.Prefix(o, oSpec)
		switch {
		case prefix != "" && (prefix == theirs || prefix == o.GetProvider()):
			return prefixTaken("providerSpecificData.prefix",
				fmt.Sprintf("prefix '%s' already names the models of connection '%s' (provider '%s'); choose another prefix",
					prefix, o.GetName(), o.GetProvider()))
		case !withProvider:
		case own == theirs || own == o.GetProvider() || c.GetProvider() == theirs:
			name := own
			if c.GetProvider() == theirs {
				name = theirs
			}
			return prefixTaken("provider",
				fmt.Sprintf("'%s', which names the models of provider '%s', already names those of connection '%s' (provider '%s'); give that connection another prefix",
					name, c.GetProvider(), o.GetName(), o.GetProvider()))
		}
	}
	return nil
}
