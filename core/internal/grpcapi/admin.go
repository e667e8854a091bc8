package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/apikey"
	"github.com/switchboardhq/switchboard/core/internal/catalog"
	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/upstream"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// MDHTTPCode is response metadata asking the HTTP gateway for a status other
// than 200 (201 for creations).
const MDHTTPCode = contract.MDHTTPCode

// Caveman levels (decisions.md).
var cavemanLevels = map[string]bool{"lite": true, "full": true, "ultra": true, "wenyan-lite": true, "wenyan": true, "wenyan-ultra": true}

// Admin implements corev1.AdminServer.
type Admin struct {
	corev1.UnimplementedAdminServer

	auth      *Authenticator
	store     *store.Store
	vault     *vault.Vault
	cooldowns *store.Cooldowns
	lister    *catalog.Lister
	keySecret []byte
	registry  *provider.Registry
	log       *slog.Logger
	now       func() time.Time
	// upstream carries the provider checks (checks.go).
	upstream *upstream.Clients
	// logins runs the OAuth logins (oauth.go); nil until EnableOAuth.
	logins *OAuthDeps
	// usageHealth reports the usage pipeline (usage_stats.go); nil until
	// WithUsageHealth.
	usageHealth UsageHealth
	// js reads the request log from SB_USAGE (requests.go); nil until
	// EnableRequestLog.
	js jetstream.JetStream
	// signIns are the console's one-time sign-in codes (signin.go).
	signIns signInCodes
	// serving ends when the process starts shutting down; the logins in
	// flight end with it (oauth.go). Background until EndLoginsWith.
	serving context.Context
}

var _ corev1.AdminServer = (*Admin)(nil)

// NewAdmin returns the Admin service.
func NewAdmin(auth *Authenticator, st *store.Store, v *vault.Vault, cooldowns *store.Cooldowns, lister *catalog.Lister, keySecret []byte, reg *provider.Registry, log *slog.Logger) *Admin {
	return &Admin{auth: auth, store: st, vault: v, cooldowns: cooldowns, lister: lister, keySecret: keySecret, registry: reg, log: log, now: time.Now}
}

func created(ctx context.Context) {
	_ = grpc.SetHeader(ctx, metadata.Pairs(MDHTTPCode, "201"))
}

func validURL(raw string, schemes ...string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return true
		}
	}
	return false
}

func (a *Admin) validData(d *corev1.ProviderSpecificData, spec provider.Spec) error {
	if d.GetBaseUrl() != "" && !validURL(d.GetBaseUrl(), "http", "https") {
		return invalidParam("providerSpecificData.baseUrl", "invalid_base_url", "baseUrl must be an http(s) URL")
	}
	if spec.Family != "" && d.GetBaseUrl() == "" {
		return missingParam("providerSpecificData.baseUrl")
	}
	if d.GetPrefix() != "" && !provider.ValidPrefix(d.GetPrefix()) {
		return invalidParam("providerSpecificData.prefix", "invalid_prefix", "prefix must be 1-64 letters, digits, '.', '_' or '-'")
	}
	if lvl := d.GetCaveman().GetLevel(); lvl != "" && !cavemanLevels[lvl] {
		return invalidParam("providerSpecificData.caveman.level", "invalid_value", "caveman.level must be one of lite, full, ultra, wenyan-lite, wenyan, wenyan-ultra")
	}
	if d.GetProxyUrl() != "" && !validURL(d.GetProxyUrl(), "http", "https", "socks5", "socks5h") {
		return invalidParam("providerSpecificData.proxyUrl", "invalid_proxy_url", "proxyUrl must be an http(s) or socks5 URL")
	}
	for _, m := range d.GetEnabledModels() {
		if m == "" {
			return invalidParam("providerSpecificData.enabledModels", "invalid_value", "enabledModels must not hold empty ids")
		}
	}
	return nil
}

// newProvider is the spec of the provider id of a connection about to be
// added. A compatible id's suffix must follow the prefix rule; connections
// stored before it was checked keep theirs (provider.Family).
func (a *Admin) newProvider(id string) (provider.Spec, error) {
	if id == "" {
		return provider.Spec{}, missingParam("provider")
	}
	spec, ok := a.registry.Lookup(id)
	if !ok {
		return provider.Spec{}, invalidParam("provider", "unknown_provider", fmt.Sprintf("unknown provider '%s'", id))
	}
	if spec.Family != "" && !provider.ValidCompatibleID(id) {
		return provider.Spec{}, invalidParam("provider", "invalid_value",
			fmt.Sprintf("the suffix of an %s-<suffix> provider id must be 1-64 letters, digits, '.', '_' or '-'", spec.Family))
	}
	return spec, nil
}

// CreateConnection stores a new connection.
func (a *Admin) CreateConnection(ctx context.Context, req *corev1.CreateConnectionRequest) (*corev1.CreateConnectionResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := a.newProvider(req.GetProvider())
	if err != nil {
		return nil, err
	}
	if err := validName("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := a.validData(req.GetProviderSpecificData(), spec); err != nil {
		return nil, err
	}
	if err := baseURLWithoutCredentials(req.GetProviderSpecificData().GetBaseUrl()); err != nil {
		return nil, err
	}
	if err := validModelIDs("providerSpecificData.enabledModels", req.GetProviderSpecificData().GetEnabledModels(), maxEnabledModels, "enabled models"); err != nil {
		return nil, err
	}
	if o := req.GetOauth(); o != nil && o.GetTokenUrl() != "" && !validURL(o.GetTokenUrl(), "http", "https") {
		return nil, invalidParam("oauth.tokenUrl", "invalid_value", "oauth.tokenUrl must be an http(s) URL")
	}
	// A hosted provider serves nobody without a credential: its connection
	// would answer every request with the upstream's 401, which reads as
	// the client's own key refused. A compatible server may need none.
	if spec.Family == "" && req.GetApiKey() == "" && req.GetOauth().GetAccessToken() == "" && req.GetOauth().GetRefreshToken() == "" {
		return nil, missingParam("apiKey")
	}
	now := timestamppb.New(a.now())
	c := &busv1.Connection{
		Id:        uuid.NewString(),
		MachineId: machineID,
		Provider:  req.GetProvider(),
		Name:      req.GetName(),
		Priority:  1,
		IsActive:  true,
		Data: &busv1.ProviderData{
			BaseUrl:       req.GetProviderSpecificData().GetBaseUrl(),
			Prefix:        req.GetProviderSpecificData().GetPrefix(),
			EnabledModels: req.GetProviderSpecificData().GetEnabledModels(),
			Caveman:       busCaveman(req.GetProviderSpecificData().GetCaveman()),
		},
		CreatedAt: now,
		UpdatedAt: now,
	}
	if req.Priority != nil {
		c.Priority = req.GetPriority()
	}
	if req.IsActive != nil {
		c.IsActive = req.GetIsActive()
	}
	if err := a.freePrefix(c, spec, true); err != nil {
		return nil, err
	}
	// The proxy URL may carry a password: it is sealed with the secrets.
	sec := &busv1.Secrets{ApiKey: req.GetApiKey(), ProxyUrl: req.GetProviderSpecificData().GetProxyUrl()}
	if o := req.GetOauth(); o != nil {
		sec.AccessToken, sec.RefreshToken = o.GetAccessToken(), o.GetRefreshToken()
		c.Oauth = &busv1.OAuthState{TokenUrl: o.GetTokenUrl(), ClientId: o.GetClientId(), ExpiresAt: o.GetExpiresAt()}
	}
	// A token brought from elsewhere (OAuth, or given as the API key) keeps
	// what a login here would have kept from it (Codex: the ChatGPT account
	// its requests name), read from the credential the requests present.
	c.Data.Values = a.loginValues(c.Provider, oauth.Token{AccessToken: vault.Credential(sec)})
	if err := a.seal(c, sec); err != nil {
		return nil, err
	}
	if err := a.store.Connections.Create(ctx, store.ConnectionKey(machineID, c.Id), c); err != nil {
		return nil, a.storeError(err)
	}
	a.log.Info("connection created", "machine", machineID, "connection", c.Id, "provider", c.Provider)
	created(ctx)
	return &corev1.CreateConnectionResponse{Connection: a.view(c)}, nil
}

func (a *Admin) seal(c *busv1.Connection, sec *busv1.Secrets) error {
	if err := a.vault.Seal(c, sec); err != nil {
		a.log.Error("sealing connection secrets failed", "connection", c.GetId(), "err", err)
		return internal("seal secrets")
	}
	return nil
}

func (a *Admin) open(c *busv1.Connection) (*busv1.Secrets, error) {
	sec, err := a.vault.Open(c)
	if err != nil {
		a.log.Error("opening connection secrets failed", "connection", c.GetId(), "err", err)
		return nil, internal("connection secrets cannot be opened")
	}
	return sec, nil
}

// view is the public projection of a connection: never a secret.
func (a *Admin) view(c *busv1.Connection) *corev1.Connection {
	v := &corev1.Connection{
		Id:        c.GetId(),
		MachineId: c.GetMachineId(),
		Provider:  c.GetProvider(),
		Name:      c.GetName(),
		Priority:  c.GetPriority(),
		IsActive:  c.GetIsActive(),
		ProviderSpecificData: &corev1.ProviderSpecificData{
			BaseUrl:       shownBaseURL(c.GetData().GetBaseUrl()),
			Prefix:        c.GetData().GetPrefix(),
			EnabledModels: c.GetData().GetEnabledModels(),
			Caveman:       coreCaveman(c.GetData().GetCaveman()),
		},
		AuthType:       "apikey",
		NeedsRelogin:   c.GetOauth().GetNeedsRelogin(),
		RefreshError:   c.GetOauth().GetLastError(),
		RefreshErrorAt: c.GetOauth().GetLastErrorAt(),
		ExpiresAt:      c.GetOauth().GetExpiresAt(),
		CreatedAt:      c.GetCreatedAt(),
		UpdatedAt:      c.GetUpdatedAt(),
		LastTest:       testView(c.GetLastTest()),
	}
	if c.GetOauth() != nil {
		v.AuthType = "oauth"
	}
	if sec, err := a.open(c); err == nil {
		v.HasApiKey = sec.GetApiKey() != ""
		v.HasAccessToken = sec.GetAccessToken() != ""
		v.ProviderSpecificData.ProxyUrl = vault.RedactURL(vault.ProxyURL(c, sec))
		// Kept with them hidden (refreshError), but one an earlier release
		// recorded was kept as the worker sent it.
		v.RefreshError = secrets.HideRuns(v.RefreshError, sec.GetAccessToken(), sec.GetRefreshToken(), sec.GetApiKey())
	}
	return v
}

// connection returns a connection of the machine. A connection this
// replica's mirror misses is looked for again once the mirror caught up
// with the bucket; should the bucket not answer, the call is refused as
// one to try again, not as one naming no connection: a worker told the
// connection is gone ends its job (a new connection's catalog fetch) with
// nothing done.
func (a *Admin) connection(ctx context.Context, machineID, id string) (kvmirror.Entry[*busv1.Connection], error) {
	if id == "" {
		return kvmirror.Entry[*busv1.Connection]{}, missingParam("id")
	}
	key := store.ConnectionKey(machineID, id)
	e, ok := a.store.Connections.Get(key)
	if ok {
		return e, nil
	}
	if err := a.store.Connections.CatchUp(ctx); err != nil {
		a.log.Warn("connection not in this replica's mirror, which could not catch up", "connection", id, "err", err)
		return e, storeUnavailable()
	}
	if e, ok = a.store.Connections.Get(key); !ok {
		return e, notFound("connection_not_found", fmt.Sprintf("no connection with id '%s'", id))
	}
	return e, nil
}

func (a *Admin) storeError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err // refused by the request's own checks
	}
	switch {
	case valueTooLarge(err):
		a.log.Info("store write refused: value too large", "err", err)
		return tooLarge()
	case errors.Is(err, kvmirror.ErrNotFound):
		return notFound("not_found", "not found")
	case errors.Is(err, context.Canceled):
		return statusError(codes.Canceled, "canceled", "the request was canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return statusError(codes.DeadlineExceeded, "timeout", "the state store did not answer in time, try again")
	}
	a.log.Error("store write failed", "err", err)
	return storeUnavailable()
}

// ListConnections lists the machine's connections.
func (a *Admin) ListConnections(ctx context.Context, _ *corev1.ListConnectionsRequest) (*corev1.ListConnectionsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	conns := a.store.MachineConnections(machineID)
	out := &corev1.ListConnectionsResponse{Connections: make([]*corev1.Connection, 0, len(conns))}
	for _, c := range conns {
		out.Connections = append(out.Connections, a.view(c))
	}
	return out, nil
}

// GetConnection returns one connection.
func (a *Admin) GetConnection(ctx context.Context, req *corev1.GetConnectionRequest) (*corev1.GetConnectionResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	e, err := a.connection(ctx, machineID, req.GetId())
	if err != nil {
		return nil, err
	}
	return &corev1.GetConnectionResponse{Connection: a.view(e.Value)}, nil
}

// UpdateConnection changes the fields the request carries.
func (a *Admin) UpdateConnection(ctx context.Context, req *corev1.UpdateConnectionRequest) (*corev1.UpdateConnectionResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	cur, err := a.connection(ctx, machineID, req.GetId())
	if err != nil {
		return nil, err
	}
	if req.Name != nil && req.GetName() == "" {
		return nil, invalidParam("name", "invalid_value", "name must not be empty")
	}
	if err := nameLength("name", req.GetName()); err != nil {
		return nil, err
	}
	patch := req.GetProviderSpecificData()
	if patch == nil {
		patch = &corev1.ProviderSpecificDataPatch{}
	}
	var enabled []string
	if patch.GetEnabledModels() != nil {
		for _, v := range patch.GetEnabledModels().GetValues() {
			if _, ok := v.GetKind().(*structpb.Value_StringValue); !ok || v.GetStringValue() == "" {
				return nil, invalidParam("providerSpecificData.enabledModels", "invalid_value", "enabledModels must be a list of model ids")
			}
			enabled = append(enabled, v.GetStringValue())
		}
		if err := validModelIDs("providerSpecificData.enabledModels", enabled, maxEnabledModels, "enabled models"); err != nil {
			return nil, err
		}
	}
	spec, _ := a.registry.Lookup(cur.Value.GetProvider())
	// reached reports a change of how the connection is reached (its key,
	// base URL or proxy) or its reactivation: the cooldowns the old settings
	// earned no longer say anything about it.
	var reached bool
	next, err := a.store.Connections.Modify(ctx, store.ConnectionKey(machineID, req.GetId()), func(c *busv1.Connection) error {
		reached = req.IsActive != nil && req.GetIsActive() && !c.GetIsActive()
		if req.Name != nil {
			c.Name = req.GetName()
		}
		if req.Priority != nil {
			c.Priority = req.GetPriority()
		}
		if req.IsActive != nil {
			c.IsActive = req.GetIsActive()
		}
		if c.Data == nil {
			c.Data = &busv1.ProviderData{}
		}
		// A base URL sent back as its view showed it is the stored one.
		if patch.BaseUrl != nil && patch.GetBaseUrl() != shownBaseURL(c.Data.BaseUrl) {
			if err := baseURLWithoutCredentials(patch.GetBaseUrl()); err != nil {
				return err
			}
			reached = reached || patch.GetBaseUrl() != c.Data.BaseUrl
			c.Data.BaseUrl = patch.GetBaseUrl()
		}
		// A prefix the connection has (one stored before prefixes were
		// checked too), sent back unchanged, is kept.
		newPrefix := patch.Prefix != nil && patch.GetPrefix() != "" && patch.GetPrefix() != c.Data.Prefix
		if patch.Prefix != nil {
			c.Data.Prefix = patch.GetPrefix()
		}
		if patch.GetEnabledModels() != nil {
			c.Data.EnabledModels = enabled
		}
		if patch.GetCaveman() != nil {
			c.Data.Caveman = busCaveman(patch.GetCaveman())
		}
		if err := a.validData(&corev1.ProviderSpecificData{
			BaseUrl: c.Data.BaseUrl, Prefix: c.Data.Prefix, EnabledModels: c.Data.EnabledModels, ProxyUrl: patch.GetProxyUrl(),
			Caveman: coreCaveman(c.Data.Caveman),
		}, spec); err != nil {
			return err
		}
		if newPrefix {
			if err := a.freePrefix(c, spec, false); err != nil {
				return err
			}
		}
		// A proxy URL an earlier release kept in plain text is sealed on
		// this write too.
		if req.ApiKey != nil || patch.ProxyUrl != nil || c.Data.ProxyUrl != "" {
			sec, err := a.open(c)
			if err != nil {
				return err
			}
			sec.ProxyUrl = vault.ProxyURL(c, sec)
			c.Data.ProxyUrl = ""
			key, proxy := sec.GetApiKey(), sec.GetProxyUrl()
			// The redacted form this API shows, sent back unchanged,
			// keeps the proxy (and its password) as it is.
			// An edited one keeps the credentials it still shows redacted.
			if patch.ProxyUrl != nil && (patch.GetProxyUrl() != vault.RedactURL(sec.GetProxyUrl()) || sec.GetProxyUrl() == "") {
				sec.ProxyUrl = vault.KeepRedacted(patch.GetProxyUrl(), sec.GetProxyUrl())
			}
			if req.ApiKey != nil {
				sec.ApiKey = req.GetApiKey()
				if sec.ApiKey != "" {
					// What the old credential named is not this one's.
					c.Data.Values = a.loginValues(c.Provider, oauth.Token{AccessToken: sec.ApiKey})
				}
			}
			reached = reached || sec.GetApiKey() != key || sec.GetProxyUrl() != proxy
			if err := a.seal(c, sec); err != nil {
				return err
			}
		}
		c.UpdatedAt = timestamppb.New(a.now())
		return nil
	})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, a.storeError(err)
	}
	if reached {
		// The next request tries the mended connection at once, rather
		// than answering from the cooldown of a key that was refused.
		a.endCooldowns(ctx, machineID, req.GetId(), "connection changed")
	}
	return &corev1.UpdateConnectionResponse{Connection: a.view(next)}, nil
}

// endCooldowns removes a connection's cooldowns (with reasons, those for
// one of them) after a change that makes them moot (or its deletion). The
// change is made already: a failure is logged, not answered, and a client
// hanging up does not stop it.
func (a *Admin) endCooldowns(ctx context.Context, machineID, connectionID, why string, reasons ...credential.Reason) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	n, err := a.cooldowns.ClearConnection(ctx, connectionID, reasons...)
	if err != nil {
		a.log.Warn("cooldowns of a connection left behind", "machine", machineID, "connection", connectionID, "why", why, "err", err)
		return
	}
	if n > 0 {
		a.log.Info("cooldowns cleared", "machine", machineID, "connection", connectionID, "why", why, "count", n)
	}
}

// DeleteConnection removes a connection, its catalog and its cooldowns.
func (a *Admin) DeleteConnection(ctx context.Context, req *corev1.DeleteConnectionRequest) (*corev1.DeleteConnectionResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := a.connection(ctx, machineID, req.GetId()); err != nil {
		return nil, err
	}
	key := store.ConnectionKey(machineID, req.GetId())
	if err := a.store.Connections.Delete(ctx, key); err != nil {
		return nil, a.storeError(err)
	}
	if err := a.store.Catalogs.Delete(ctx, key); err != nil {
		a.log.Warn("catalog of a deleted connection left behind", "connection", req.GetId(), "err", err)
	}
	a.endCooldowns(ctx, machineID, req.GetId(), "connection deleted")
	a.log.Info("connection deleted", "machine", machineID, "connection", req.GetId())
	return &corev1.DeleteConnectionResponse{Id: req.GetId(), Deleted: true}, nil
}

// CreateAPIKey issues a key; the raw key is returned this once.
func (a *Admin) CreateAPIKey(ctx context.Context, req *corev1.CreateAPIKeyRequest) (*corev1.CreateAPIKeyResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if err := validName("name", req.GetName()); err != nil {
		return nil, err
	}
	for range 8 {
		raw, parsed, err := apikey.New(machineID)
		if err != nil {
			a.log.Error("generating an api key failed", "err", err)
			return nil, internal("generate key")
		}
		if a.keyIDTaken(machineID, parsed.KeyID) {
			continue
		}
		k := &busv1.APIKey{Id: parsed.KeyID, MachineId: machineID, Name: req.GetName(), CreatedAt: timestamppb.New(a.now())}
		err = a.store.Keys.Create(ctx, apikey.LookupID(a.keySecret, raw), k)
		if errors.Is(err, kvmirror.ErrExists) {
			continue
		}
		if err != nil {
			return nil, a.storeError(err)
		}
		a.log.Info("api key created", "machine", machineID, "key_id", k.GetId())
		created(ctx)
		return &corev1.CreateAPIKeyResponse{Key: raw, Id: k.GetId(), Name: k.GetName(), MachineId: machineID, CreatedAt: k.GetCreatedAt()}, nil
	}
	return nil, internal("could not allocate a unique key id")
}

// keyIDTaken reports whether a machine already has a key with this id: ids
// name keys in listings, usage and revocation, so they stay unique.
func (a *Admin) keyIDTaken(machineID, keyID string) bool {
	for _, k := range a.keysOf(machineID) {
		if k.GetId() == keyID {
			return true
		}
	}
	return false
}

func (a *Admin) keysOf(machineID string) map[string]*busv1.APIKey {
	out := make(map[string]*busv1.APIKey)
	a.store.Keys.Range(func(hash string, e kvmirror.Entry[*busv1.APIKey]) bool {
		if e.Value.GetMachineId() == machineID {
			out[hash] = e.Value
		}
		return true
	})
	return out
}

// ListAPIKeys lists the machine's keys without the raw keys.
func (a *Admin) ListAPIKeys(ctx context.Context, _ *corev1.ListAPIKeysRequest) (*corev1.ListAPIKeysResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	out := &corev1.ListAPIKeysResponse{Keys: []*corev1.APIKey{}}
	seen := map[string]bool{}
	for _, k := range a.keysOf(machineID) {
		if seen[k.GetId()] {
			continue // a key moving to its keyed lookup id (findKey)
		}
		seen[k.GetId()] = true
		out.Keys = append(out.Keys, &corev1.APIKey{Id: k.GetId(), Name: k.GetName(), MachineId: k.GetMachineId(), CreatedAt: k.GetCreatedAt()})
	}
	sortKeys(out.Keys)
	return out, nil
}

// DeleteAPIKey revokes a key.
func (a *Admin) DeleteAPIKey(ctx context.Context, req *corev1.DeleteAPIKeyRequest) (*corev1.DeleteAPIKeyResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() == "" {
		return nil, missingParam("id")
	}
	// A key an earlier release stored may briefly have two entries while it
	// moves to its keyed lookup id (findKey): revoking removes every entry
	// of the id, looking again once the mirror holds its own deletes (and so
	// every entry created before them).
	found := false
	for range 3 {
		deleted := false
		for hash, k := range a.keysOf(machineID) {
			if k.GetId() != req.GetId() {
				continue
			}
			if err := a.store.Keys.Delete(ctx, hash); err != nil {
				return nil, a.storeError(err)
			}
			deleted, found = true, true
		}
		if !deleted {
			break
		}
	}
	if found {
		a.log.Info("api key revoked", "machine", machineID, "key_id", req.GetId())
		return &corev1.DeleteAPIKeyResponse{Id: req.GetId(), Deleted: true}, nil
	}
	return nil, notFound("key_not_found", fmt.Sprintf("no API key with id '%s'", req.GetId()))
}

func (a *Admin) settingsView(machineID string) *corev1.Settings {
	s := a.store.MachineSettings(machineID)
	v := &corev1.Settings{
		RequireApiKey:   a.auth.KeysRequired(machineID),
		CavemanEnabled:  s.GetCavemanEnabled(),
		CavemanLevel:    s.GetCavemanLevel(),
		RoutingStrategy: s.GetRoutingStrategy(),
		StickyLimit:     s.GetStickyLimit(),
	}
	if v.CavemanLevel == "" {
		v.CavemanLevel = "full"
	}
	if v.RoutingStrategy == "" {
		v.RoutingStrategy = "fill-first"
	}
	if v.StickyLimit == 0 {
		v.StickyLimit = 3
	}
	return v
}

// GetSettings returns the machine's settings.
func (a *Admin) GetSettings(ctx context.Context, _ *corev1.GetSettingsRequest) (*corev1.GetSettingsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	return &corev1.GetSettingsResponse{Settings: a.settingsView(machineID)}, nil
}

// UpdateSettings changes the settings the request carries.
func (a *Admin) UpdateSettings(ctx context.Context, req *corev1.UpdateSettingsRequest) (*corev1.UpdateSettingsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if req.CavemanLevel != nil && !cavemanLevels[req.GetCavemanLevel()] {
		return nil, invalidParam("cavemanLevel", "invalid_value", "cavemanLevel must be one of lite, full, ultra, wenyan-lite, wenyan, wenyan-ultra")
	}
	if req.RoutingStrategy != nil && req.GetRoutingStrategy() != "fill-first" && req.GetRoutingStrategy() != "round-robin" {
		return nil, invalidParam("routingStrategy", "invalid_value", "routingStrategy must be fill-first or round-robin")
	}
	if req.StickyLimit != nil && (req.GetStickyLimit() < 1 || req.GetStickyLimit() > 1000) {
		return nil, invalidParam("stickyLimit", "invalid_value", "stickyLimit must be between 1 and 1000")
	}
	err = a.modifySettings(ctx, machineID, func(s *busv1.Settings) {
		if req.RequireApiKey != nil {
			s.RequireApiKey = req.GetRequireApiKey()
		}
		if req.CavemanEnabled != nil {
			s.CavemanEnabled = req.GetCavemanEnabled()
		}
		if req.CavemanLevel != nil {
			s.CavemanLevel = req.GetCavemanLevel()
		}
		if req.RoutingStrategy != nil {
			s.RoutingStrategy = req.GetRoutingStrategy()
		}
		if req.StickyLimit != nil {
			s.StickyLimit = req.GetStickyLimit()
		}
	})
	if err != nil {
		return nil, a.storeError(err)
	}
	return &corev1.UpdateSettingsResponse{Settings: a.settingsView(machineID)}, nil
}

// busCaveman is a connection's caveman override as stored; an empty one
// ({}: neither enabled nor a level) is none, the machine's setting then
// holding, so that {} removes an override.
func busCaveman(o *corev1.CavemanOverride) *busv1.CavemanOverride {
	if o == nil || o.Enabled == nil && o.GetLevel() == "" {
		return nil
	}
	return &busv1.CavemanOverride{Enabled: o.Enabled, Level: o.GetLevel()}
}

func coreCaveman(o *busv1.CavemanOverride) *corev1.CavemanOverride {
	if o == nil {
		return nil
	}
	return &corev1.CavemanOverride{Enabled: o.Enabled, Level: o.GetLevel()}
}

// shownBaseURL is a connection's base URL as its views show it: one stored
// with credentials before they were refused (user:password@) shows them
// redacted, as a proxy URL's are.
func shownBaseURL(raw string) string {
	if !strings.Contains(raw, "@") {
		return raw
	}
	return vault.RedactURL(raw)
}

// baseURLWithoutCredentials refuses a base URL being set with credentials
// in it (user:password@) or with a query or fragment: base URLs are shown
// in every view of their connection and kept in plain text, so a
// credential there (?api_key=) would be neither sealed nor hidden, and a
// route's path appended to a query would reach no route. One stored
// before is left as it is.
func baseURLWithoutCredentials(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
	case u.User != nil:
		return invalidParam("providerSpecificData.baseUrl", "invalid_base_url", "baseUrl must not carry credentials (user:password@): give the key as apiKey")
	case u.ForceQuery || u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw, "#"):
		return invalidParam("providerSpecificData.baseUrl", "invalid_base_url", "baseUrl must not carry a query or fragment: the gateway appends the route's path to it (give a key as apiKey)")
	}
	return nil
}
