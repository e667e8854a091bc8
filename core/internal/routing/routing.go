// Package routing resolves the model a request names to a provider, the
// upstream model id, and the machine's connections that can serve it.
package routing

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// ErrModelNotFound is returned for a model no connection of the machine
// serves and no known provider names.
var ErrModelNotFound = errors.New("model not found")

// ErrNoCredentials is returned when the model names a known provider for
// which the machine has no usable connection.
var ErrNoCredentials = errors.New("no credentials")

// NotEnabledError is returned when the model's prefix names a provider
// whose usable connections all have enabled models that leave the model
// out: enabled models are the models a connection serves. It is an
// ErrModelNotFound.
type NotEnabledError struct {
	// Model is the model as resolved, prefix and all.
	Model string
	// Provider is the provider id of the connections the prefix names.
	Provider string
}

func (e *NotEnabledError) Error() string {
	return fmt.Sprintf("model %q is not among the enabled models of any active %q connection", e.Model, e.Provider)
}

// Is makes a NotEnabledError an ErrModelNotFound.
func (e *NotEnabledError) Is(target error) bool { return target == ErrModelNotFound }

// NeedsLoginError is returned when the model's prefix names a provider
// whose switched-on connections all await a new login (their refresh token
// was refused): an ErrNoCredentials that says what would mend it.
type NeedsLoginError struct {
	// Provider is the provider id of those connections.
	Provider string
}

func (e *NeedsLoginError) Error() string {
	return fmt.Sprintf("the %q connections need a new login", e.Provider)
}

// Is makes a NeedsLoginError an ErrNoCredentials.
func (e *NeedsLoginError) Is(target error) bool { return target == ErrNoCredentials }

// Target is where a request goes.
type Target struct {
	Spec provider.Spec
	// Alias is the public prefix the request used.
	Alias string
	// Model is the upstream model id.
	Model string
	// Connections can serve the model, in the order to try them: by tier
	// (Tier), then by priority.
	Connections []*busv1.Connection
	// listed and unlisted count the Connections of the first and of the
	// last tier; the others are Unknown (all of them in a Target made
	// without tiers).
	listed, unlisted int
}

// Tier is how a connection's known model list stands to a target's model.
// A connection is tried before those of later tiers, so a key whose live
// catalog leaves a model out (its project has no access: the upstream
// would answer 404, which is not a reason to fall back) is asked for it
// only after the others; it stays a candidate, so a stale or partial
// catalog never makes a model unreachable. Enabled models are no such
// list: a connection serves only the models it enables (serves), so it is
// never a candidate for the others.
type Tier int

const (
	// Listed: the connection's enabled models, or its live catalog in
	// force, name the model.
	Listed Tier = iota
	// Unknown: the connection has no known list (no catalog fetched yet,
	// a fetch that failed with no list in force, a provider without a
	// listing).
	Unknown
	// Unlisted: the connection's live catalog in force leaves the model
	// out.
	Unlisted
)

// Tier is the tier of Connections[i].
func (t Target) Tier(i int) Tier {
	switch {
	case i < t.listed:
		return Listed
	case i >= len(t.Connections)-t.unlisted:
		return Unlisted
	default:
		return Unknown
	}
}

// add appends a connection to Connections after those of its tier and of
// earlier tiers, before those of later ones: connections added in priority
// order are in the order to try them.
func (t *Target) add(c *busv1.Connection, tier Tier) {
	t.Connections = append(t.Connections, c)
	last := len(t.Connections) - 1
	pos := last
	switch tier {
	case Listed:
		pos = t.listed
		t.listed++
	case Unknown:
		pos = last - t.unlisted
	default:
		t.unlisted++
	}
	if pos < last {
		copy(t.Connections[pos+1:], t.Connections[pos:last])
		t.Connections[pos] = c
	}
}

// Resolver resolves models against a machine's connections.
type Resolver struct {
	store    *store.Store
	registry *provider.Registry
}

// NewResolver returns a Resolver.
func NewResolver(st *store.Store, reg *provider.Registry) *Resolver {
	return &Resolver{store: st, registry: reg}
}

// MaxAliasDepth bounds alias chains (an alias naming another alias).
const MaxAliasDepth = 4

// ResolveAll maps a model string to the targets to try in order: the models
// of a combo (named, or named by an alias), or the one target of any other
// model.
func (r *Resolver) ResolveAll(machineID, model string) ([]Target, error) {
	settings := r.store.MachineSettings(machineID)
	name := model
	for step := 0; ; step++ {
		if c := combo(settings, name); c != nil {
			return r.expand(machineID, c)
		}
		target, ok := settings.GetAliases()[name]
		if !ok || step == MaxAliasDepth {
			break
		}
		name = target
	}
	t, err := r.resolveName(machineID, name)
	if err != nil {
		return nil, err
	}
	return []Target{t}, nil
}

// combo is the machine's combo called name, or nil.
func combo(settings *busv1.Settings, name string) *busv1.Combo {
	for _, c := range settings.GetCombos() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// expand resolves a combo's models, in order; a model that does not
// resolve is left out, and the first error is the answer when none does.
func (r *Resolver) expand(machineID string, c *busv1.Combo) ([]Target, error) {
	var out []Target
	var firstErr error
	for _, m := range c.GetModels() {
		t, err := r.Resolve(machineID, m)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		if firstErr == nil {
			firstErr = ErrModelNotFound
		}
		return nil, firstErr
	}
	return out, nil
}

// Resolve maps a model string to a target. The forms are a machine alias
// (resolved to its target); "<prefix>/<model>" where prefix is a
// connection's prefix, its provider's alias or its provider id; and a bare
// model id that one of the machine's connections lists, slashes and all
// (see wholeID).
func (r *Resolver) Resolve(machineID, model string) (Target, error) {
	aliases := r.store.MachineSettings(machineID).GetAliases()
	for range MaxAliasDepth {
		target, ok := aliases[model]
		if !ok {
			break
		}
		model = target
	}
	return r.resolveName(machineID, model)
}

// resolveName is Resolve of a model whose aliases were followed.
func (r *Resolver) resolveName(machineID, model string) (Target, error) {
	if model == "" {
		return Target{}, ErrModelNotFound
	}
	conns := r.store.MachineConnections(machineID)
	if prefix, rest, ok := strings.Cut(model, "/"); ok && rest != "" {
		t, found, err := r.byPrefix(conns, prefix, rest)
		if errors.Is(err, ErrNoCredentials) || errors.Is(err, ErrModelNotFound) {
			return r.wholeID(conns, model, err)
		}
		if found || err != nil {
			return t, err
		}
	}
	return r.byListing(conns, model)
}

// Usable reports whether a connection may take requests: it is switched on
// and does not need a new login. The model listing lists only the models of
// such connections, so what it lists and what is served are decided here
// alone.
func Usable(c *busv1.Connection) bool {
	return c.GetIsActive() && !c.GetOauth().GetNeedsRelogin()
}

// Prefix is the part before a model id's slash that names a connection's
// models: its prefix, else its provider's alias. Its provider id names them
// too.
func Prefix(c *busv1.Connection, spec provider.Spec) string {
	if p := c.GetData().GetPrefix(); p != "" {
		return p
	}
	return spec.Alias
}

// serves reports whether a connection may be asked for a model: a
// connection with enabled models serves only those.
func serves(c *busv1.Connection, model string) bool {
	enabled := c.GetData().GetEnabledModels()
	return len(enabled) == 0 || slices.Contains(enabled, model)
}

func (r *Resolver) byPrefix(conns []*busv1.Connection, prefix, model string) (Target, bool, error) {
	var t Target
	var now time.Time // read once, by the first catalog's tier
	known := false
	usable := ""  // the provider of the first usable connection named
	relogin := "" // the provider of the first switched-on one awaiting a login
	for _, c := range conns {
		spec, ok := r.registry.Lookup(c.GetProvider())
		if !ok {
			continue
		}
		alias := Prefix(c, spec)
		if alias != prefix && c.GetProvider() != prefix {
			continue
		}
		known = true
		if !Usable(c) {
			if relogin == "" && c.GetIsActive() {
				relogin = c.GetProvider()
			}
			continue
		}
		if usable == "" {
			usable = c.GetProvider()
		}
		if !serves(c, model) {
			continue
		}
		if len(t.Connections) == 0 {
			t = Target{Spec: spec, Alias: prefix, Model: model}
		} else if c.GetProvider() != t.Spec.ID {
			continue // one provider per target; the first by priority wins
		}
		t.add(c, r.tier(c, model, &now))
	}
	if len(t.Connections) > 0 {
		return t, true, nil
	}
	if usable != "" {
		return Target{}, true, &NotEnabledError{Model: prefix + "/" + model, Provider: usable}
	}
	if relogin != "" {
		return Target{}, true, &NeedsLoginError{Provider: relogin}
	}
	if known {
		return Target{}, true, ErrNoCredentials
	}
	// A registry provider the machine has no connection for.
	if spec, ok := r.registry.Lookup(prefix); ok && spec.Family == "" {
		return Target{}, true, ErrNoCredentials
	}
	return Target{}, false, nil
}

// wholeID resolves a model whose prefix names a provider or prefix that no
// usable connection serves it under (err: no usable connection, or none
// that enables it): an aggregator's id, which names
// the model's vendor as OpenRouter's "openai/gpt-4o-mini" does, is a bare
// id when a connection's model list holds it whole. Any other keeps err.
func (r *Resolver) wholeID(conns []*busv1.Connection, model string, err error) (Target, error) {
	if t, lerr := r.byListing(conns, model); lerr == nil {
		return t, nil
	}
	return Target{}, err
}

// byListing finds the first connection, by priority, whose model list holds
// the id, and every connection of the same provider and alias, by tier.
func (r *Resolver) byListing(conns []*busv1.Connection, model string) (Target, error) {
	for _, c := range conns {
		if !Usable(c) {
			continue
		}
		spec, ok := r.registry.Lookup(c.GetProvider())
		if !ok || !r.lists(c, spec, model) {
			continue
		}
		alias := Prefix(c, spec)
		t := Target{Spec: spec, Alias: alias, Model: model}
		var now time.Time // read once, by the first catalog's tier
		for _, o := range conns {
			if Usable(o) && o.GetProvider() == c.GetProvider() && Prefix(o, spec) == alias && serves(o, model) {
				t.add(o, r.tier(o, model, &now))
			}
		}
		return t, nil
	}
	return Target{}, ErrModelNotFound
}

// lists reports whether a connection's model list holds the id.
func (r *Resolver) lists(c *busv1.Connection, spec provider.Spec, model string) bool {
	if enabled := c.GetData().GetEnabledModels(); len(enabled) > 0 {
		return slices.Contains(enabled, model)
	}
	if _, ok := spec.Model(model); ok {
		return true
	}
	return r.store.CatalogModels(c.GetMachineId(), c.GetId()).Lists(model)
}

// tier is how the known model list of a connection that serves the model
// (serves) stands to it: enabled models, which then name it, else its live
// catalog while that is in force at *now (read when zero). A provider's
// static list is no connection's: a key may lack a model its provider
// offers.
func (r *Resolver) tier(c *busv1.Connection, model string, now *time.Time) Tier {
	if len(c.GetData().GetEnabledModels()) > 0 {
		return Listed
	}
	cat := r.store.CatalogModels(c.GetMachineId(), c.GetId())
	if cat == nil {
		return Unknown
	}
	if now.IsZero() {
		*now = time.Now()
	}
	switch {
	case !cat.InForce(*now):
		return Unknown
	case cat.Lists(model):
		return Listed
	default:
		return Unlisted
	}
}
