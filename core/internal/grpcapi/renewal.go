package grpcapi

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/oauth"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

var (
	// errLoginWritten: a completion of the same login wrote the connection
	// first (one that lost its lease); its tokens stay.
	errLoginWritten = errors.New("connection written by this login")
	// errNotRenewed: the connection changed since it was chosen (another
	// login renewed it) and this login no longer renews it.
	errNotRenewed = errors.New("connection not renewed by this login")
)

// renewConnection stores a login's tokens and OAuth state in the connection
// the login renews, under the next token generation: a refresh that
// started from the replaced tokens is stale (StoreTokens), and neither its
// tokens nor its refusal land. The connection keeps its id, name, priority,
// switch, prefix, enabled models and caveman setting; its proxy too, unless
// the login named one; its base URL unless the login's answer named the API
// host. Nil when the login renews no connection.
func (a *Admin) renewConnection(ctx context.Context, f *busv1.OAuthFlow, p oauth.Provider, values map[string]string, named string, sec *busv1.Secrets, st *busv1.OAuthState) (*busv1.Connection, error) {
	// Each round lost to a change of the chosen connection looks again.
	for range 3 {
		target := a.renewable(f.GetMachineId(), p, f.GetId(), values)
		if target == nil {
			return nil, nil
		}
		key := store.ConnectionKey(f.GetMachineId(), target.GetId())
		next, err := a.store.Connections.Modify(ctx, key, func(c *busv1.Connection) error {
			if c.GetOauth().GetLoginFlow() == f.GetId() {
				return errLoginWritten
			}
			if !renews(p, values, c) {
				return errNotRenewed
			}
			s := proto.Clone(sec).(*busv1.Secrets)
			if s.GetProxyUrl() == "" {
				old, err := a.open(c)
				if err != nil {
					old = &busv1.Secrets{} // what the login issued mends it
				}
				s.ProxyUrl = vault.ProxyURL(c, old)
			}
			if c.Data == nil {
				c.Data = &busv1.ProviderData{}
			}
			c.Data.ProxyUrl = ""
			c.Data.Values = values
			if named != "" {
				c.Data.BaseUrl = named
			}
			o := proto.Clone(st).(*busv1.OAuthState)
			o.Generation = c.GetOauth().GetGeneration() + 1
			c.Oauth = o
			c.UpdatedAt = timestamppb.New(a.now())
			return a.seal(c, s)
		})
		switch {
		case errors.Is(err, errLoginWritten):
			if e, ok := a.store.Connections.Get(key); ok {
				return e.Value, nil
			}
			continue
		case errors.Is(err, errNotRenewed), errors.Is(err, kvmirror.ErrNotFound):
			continue
		case err != nil:
			return nil, a.storeError(err)
		}
		a.log.Info("connection renewed by oauth login", "machine", next.GetMachineId(), "connection", next.GetId(), "provider", next.GetProvider(),
			"flow", f.GetId(), "generation", next.GetOauth().GetGeneration())
		// The refused token is replaced: the cooldowns it earned say
		// nothing about the new one (as after a refresh).
		a.endCooldowns(ctx, next.GetMachineId(), next.GetId(), "renewed by oauth login", credential.ReasonAuth)
		return next, nil
	}
	return nil, nil
}

// renewable is the connection a login of p on a machine renews, nil when
// it renews none and creates its own: the connection this login (flowID)
// has written already; else the provider's subscription connection of the
// login's account (p.Account), one awaiting a new login first when the
// account has several; else, when the login and the connection name no
// account to compare, the provider's only connection awaiting a new login.
// A connection of another account is never renewed.
func (a *Admin) renewable(machineID string, p oauth.Provider, flowID string, values map[string]string) *busv1.Connection {
	var mine, awaiting []*busv1.Connection
	for _, c := range a.store.MachineConnections(machineID) {
		if c.GetProvider() != p.ID || c.GetOauth() == nil {
			continue
		}
		if c.GetOauth().GetLoginFlow() == flowID {
			return c
		}
		switch known, same := sameAccount(p.Account, values, c.GetData().GetValues()); {
		case same:
			mine = append(mine, c)
		case !known && c.GetOauth().GetNeedsRelogin():
			awaiting = append(awaiting, c)
		}
	}
	switch {
	case len(mine) > 1:
		// Several of the account's: the one awaiting a new login, else
		// none (the login adds its own, never one it cannot compare).
		mine = slices.DeleteFunc(mine, func(c *busv1.Connection) bool { return !c.GetOauth().GetNeedsRelogin() })
		if len(mine) == 1 {
			return mine[0]
		}
	case len(mine) == 1:
		return mine[0]
	case len(awaiting) == 1:
		return awaiting[0]
	}
	return nil
}

// renews reports whether a login of p whose tokens name values may renew
// c: a subscription connection of p, of the login's account, or, when the
// two name no account to compare, awaiting a new login.
func renews(p oauth.Provider, values map[string]string, c *busv1.Connection) bool {
	if c.GetProvider() != p.ID || c.GetOauth() == nil {
		return false
	}
	known, same := sameAccount(p.Account, values, c.GetData().GetValues())
	return same || !known && c.GetOauth().GetNeedsRelogin()
}

// sameAccount compares the account values (names) of two logins: known
// when both name every one of them, or when a part both name differs (two
// accounts, whatever the rest); same when they are all equal. A part
// missing on either side is otherwise no comparison: a Codex connection
// stored before the user was kept names the workspace alone, which a
// team's members share.
func sameAccount(names []string, a, b map[string]string) (known, same bool) {
	if len(names) == 0 {
		return false, false
	}
	known = true
	for _, n := range names {
		x, y := a[n], b[n]
		switch {
		case x == "" || y == "":
			known = false
		case x != y:
			return true, false
		}
	}
	return known, known
}
