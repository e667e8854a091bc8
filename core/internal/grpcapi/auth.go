package grpcapi

import (
	"context"
	"crypto/subtle"

	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/core/internal/apikey"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/internal/bearer"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// Metadata keys core reads.
const (
	// MDMachine names the machine an admin call acts on.
	MDMachine = contract.MDMachine
	// MDPathMachine carries the machine id of a legacy /{machineId}/v1/...
	// route; the edge sets it, and the key must belong to that machine.
	MDPathMachine = contract.MDPathMachine
)

// Principal is the caller of a Router call.
type Principal struct {
	MachineID string
	// KeyID is the API key's id; empty when the request carried no key.
	KeyID string
}

// Authenticator resolves callers: gateway API keys to machines, and the admin
// token.
type Authenticator struct {
	store      *store.Store
	keySecret  []byte
	lookup     *apikey.Lookup
	adminToken []byte
	// requireKey forces API keys on every machine (REQUIRE_API_KEY).
	requireKey bool
	defaultID  string
}

// NewAuthenticator returns an Authenticator over the store.
func NewAuthenticator(st *store.Store, keySecret []byte, adminToken string, requireKey bool, defaultMachineID string) *Authenticator {
	return &Authenticator{
		store:      st,
		keySecret:  keySecret,
		lookup:     apikey.NewLookup(keySecret),
		adminToken: []byte(adminToken),
		requireKey: requireKey,
		defaultID:  defaultMachineID,
	}
}

// mdGetter looks up incoming metadata one key at a time. Each lookup copies
// only that key's values (metadata.FromIncomingContext would copy and
// lower-case the whole map on every call).
func mdGetter(ctx context.Context) func(string) string {
	return func(name string) string { return mdValue(ctx, name) }
}

// mdValue is the first value of an incoming metadata key, or "".
func mdValue(ctx context.Context, name string) string {
	if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Gateway resolves the caller of a gateway call from its API key. Without a
// key the call runs as the default machine, unless that machine (or the
// process) requires keys. A key that is sent is always checked.
func (a *Authenticator) Gateway(ctx context.Context) (Principal, error) {
	get := mdGetter(ctx)
	raw := apikey.FromHeaders(get)
	pathMachine := get(MDPathMachine)
	if pathMachine != "" && !apikey.ValidMachineID(pathMachine) {
		return Principal{}, invalidParam("machineId", "invalid_machine_id", "machine id in the path must be 16 lowercase hex characters")
	}
	if raw == "" && bearer.NotBearer(get("authorization")) {
		// A credential sent where no key is read (a key without the
		// Bearer scheme, Basic ...): its sender believes it is used.
		return Principal{}, unauthenticated("invalid_api_key", "the Authorization header holds no Bearer token: send the API key as Authorization: Bearer <key> (or in x-api-key)")
	}
	if raw == "" {
		// Both headers named: Anthropic's clients send x-api-key.
		if pathMachine != "" {
			return Principal{}, unauthenticated("missing_api_key", "an API key is required on this route (Authorization: Bearer <key>, or x-api-key: <key>)")
		}
		if a.KeysRequired(a.defaultID) {
			return Principal{}, unauthenticated("missing_api_key", "an API key is required (Authorization: Bearer <key>, or x-api-key: <key>)")
		}
		return Principal{MachineID: a.defaultID}, nil
	}
	parsed, err := apikey.Parse(a.keySecret, raw)
	if err != nil {
		return Principal{}, unauthenticated("invalid_api_key", "invalid API key")
	}
	k, ok := a.findKey(ctx, raw, parsed)
	if !ok || (parsed.MachineID != "" && k.GetMachineId() != parsed.MachineID) {
		return Principal{}, unauthenticated("invalid_api_key", "invalid API key")
	}
	if pathMachine != "" && k.GetMachineId() != pathMachine {
		return Principal{}, unauthenticated("invalid_api_key", "the API key does not belong to this machine")
	}
	return Principal{MachineID: k.GetMachineId(), KeyID: k.GetId()}, nil
}

// KeysRequired reports whether a machine's gateway routes need an API key.
func (a *Authenticator) KeysRequired(machineID string) bool {
	return a.requireKey || a.store.MachineSettings(machineID).GetRequireApiKey()
}

// Admin checks the admin token and resolves the machine the call acts on.
// An operator reads what they wrote, whichever core replica took the write
// (the console adds a connection through one and lists through another):
// the mirrors catch up first. Should NATS not answer, the call goes on with
// what the mirrors hold.
func (a *Authenticator) Admin(ctx context.Context) (machineID string, err error) {
	return a.admin(ctx, true)
}

// AdminWithoutCatchUp is Admin without the catch-up, for a call that acts
// on no mirrored state a replica may miss: the usage roll-up, twice a
// second, only updates with compare-and-swap; a sign-in code is minted at
// every start.
func (a *Authenticator) AdminWithoutCatchUp(ctx context.Context) (machineID string, err error) {
	return a.admin(ctx, false)
}

func (a *Authenticator) admin(ctx context.Context, catchUp bool) (machineID string, err error) {
	get := mdGetter(ctx)
	// The scheme in any case, as for API keys (apikey.FromHeaders).
	token := bearer.Token(get("authorization"))
	if token == "" || subtle.ConstantTimeCompare([]byte(token), a.adminToken) != 1 {
		return "", unauthenticated("invalid_admin_token", "a valid admin token is required (Authorization: Bearer <admin token>)")
	}
	if catchUp {
		_ = a.store.CatchUp(ctx)
	}
	id := get(MDMachine)
	if id == "" {
		return a.defaultID, nil
	}
	if _, ok := a.store.Machines.Get(id); !ok {
		// A machine created through another replica a moment ago: as for
		// a connection (Admin.connection), a miss is only an answer once
		// the mirror caught up.
		if err := a.store.Machines.CatchUp(ctx); err != nil {
			return "", storeUnavailable()
		}
		if _, ok := a.store.Machines.Get(id); !ok {
			return "", notFound("machine_not_found", "no machine with id '"+id+"'")
		}
	}
	return id, nil
}
