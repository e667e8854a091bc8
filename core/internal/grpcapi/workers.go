package grpcapi

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/credential"
	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/vault"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/spine"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// CatalogErrorTTL is how long a failed catalog fetch is remembered before a
// listing asks for another.
const CatalogErrorTTL = time.Minute

// GetConnectionCredentials hands a worker the plaintext secrets of a
// connection.
func (a *Admin) GetConnectionCredentials(ctx context.Context, req *corev1.GetConnectionCredentialsRequest) (*corev1.GetConnectionCredentialsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	e, err := a.connection(ctx, machineID, req.GetConnectionId())
	if err != nil {
		return nil, err
	}
	c := e.Value
	sec, err := a.open(c)
	if err != nil {
		return nil, err
	}
	return &corev1.GetConnectionCredentialsResponse{
		Connection:   a.view(c),
		ApiKey:       sec.GetApiKey(),
		AccessToken:  sec.GetAccessToken(),
		RefreshToken: sec.GetRefreshToken(),
		TokenUrl:     c.GetOauth().GetTokenUrl(),
		ClientId:     c.GetOauth().GetClientId(),
		Generation:   c.GetOauth().GetGeneration(),
		ProxyUrl:     vault.ProxyURL(c, sec),
	}, nil
}

// PutCatalog stores a connection's fetched model list (or the failure to
// fetch it). A failure leaves the list of an earlier fetch that is still in
// force listed until it expires, with the failure recorded beside it: an
// upstream that fails a refresh for a moment (the scheduled one before the
// hour ends, the console's look at the models) does not take the
// connection's models out of listings and routing.
func (a *Admin) PutCatalog(ctx context.Context, req *corev1.PutCatalogRequest) (*corev1.PutCatalogResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := a.connection(ctx, machineID, req.GetConnectionId()); err != nil {
		return nil, err
	}
	now := a.now()
	cat, err := a.store.Catalogs.Upsert(ctx, store.ConnectionKey(machineID, req.GetConnectionId()), func(cat *busv1.Catalog, ok bool) error {
		models, fetched, expires := cat.GetModels(), cat.GetFetchedAt(), cat.GetExpiresAt()
		inForce := ok && len(models) > 0 && now.Before(expires.AsTime())
		proto.Reset(cat)
		cat.MachineId, cat.ConnectionId = machineID, req.GetConnectionId()
		cat.FetchedAt, cat.ExpiresAt = timestamppb.New(now), timestamppb.New(now.Add(spine.CatalogTTL))
		switch {
		case req.GetError() == "":
			cat.Models = req.GetModels()
		case inForce:
			cat.Error, cat.Status = req.GetError(), req.GetStatus()
			cat.Models, cat.FetchedAt, cat.ExpiresAt = models, fetched, expires
		default:
			cat.Error, cat.Status = req.GetError(), req.GetStatus()
			cat.ExpiresAt = timestamppb.New(now.Add(CatalogErrorTTL))
		}
		return nil
	})
	if err != nil {
		return nil, a.storeError(err)
	}
	if req.GetError() != "" {
		return &corev1.PutCatalogResponse{}, nil
	}
	return &corev1.PutCatalogResponse{Count: int32(len(cat.GetModels()))}, nil
}

// ClearCooldowns lets a connection serve every model again at once.
func (a *Admin) ClearCooldowns(ctx context.Context, req *corev1.ClearCooldownsRequest) (*corev1.ClearCooldownsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := a.connection(ctx, machineID, req.GetId()); err != nil {
		return nil, err
	}
	n, err := a.cooldowns.ClearConnection(ctx, req.GetId())
	if err != nil {
		return nil, a.storeError(err)
	}
	a.log.Info("cooldowns cleared", "machine", machineID, "connection", req.GetId(), "count", n)
	return &corev1.ClearCooldownsResponse{Id: req.GetId(), Cleared: int32(n)}, nil
}

// StoreTokens writes a worker's refresh result with compare-and-swap on the
// token generation: of two refreshes racing, one is stored.
func (a *Admin) StoreTokens(ctx context.Context, req *corev1.StoreTokensRequest) (*corev1.StoreTokensResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := a.connection(ctx, machineID, req.GetConnectionId()); err != nil {
		return nil, err
	}
	if e, _ := a.store.Connections.Get(store.ConnectionKey(machineID, req.GetConnectionId())); e.Value.GetOauth() == nil {
		return nil, statusError(codes.FailedPrecondition, "not_oauth", "the connection has no OAuth tokens to refresh")
	}
	stored := false
	next, err := a.store.Connections.Modify(ctx, store.ConnectionKey(machineID, req.GetConnectionId()), func(c *busv1.Connection) error {
		stored = false
		if c.Oauth.GetGeneration() != req.GetGeneration() {
			return nil // a newer refresh already landed
		}
		if req.GetError() != "" || req.GetNeedsRelogin() {
			c.Oauth.LastError = a.refreshError(c, req.GetError())
			c.Oauth.NeedsRelogin = req.GetNeedsRelogin()
			c.UpdatedAt = timestamppb.New(a.now())
			c.Oauth.LastErrorAt = nil
			if c.Oauth.LastError != "" {
				c.Oauth.LastErrorAt = c.UpdatedAt
			}
			stored = true
			return nil
		}
		sec, err := a.open(c)
		if err != nil {
			return err
		}
		sec.AccessToken = req.GetAccessToken()
		if req.GetRefreshToken() != "" {
			sec.RefreshToken = req.GetRefreshToken()
		}
		if err := a.seal(c, sec); err != nil {
			return err
		}
		c.Oauth.ExpiresAt = req.GetExpiresAt()
		c.Oauth.Generation++
		c.Oauth.NeedsRelogin = false
		c.Oauth.LastError, c.Oauth.LastErrorAt = "", nil
		c.UpdatedAt = timestamppb.New(a.now())
		c.Oauth.RefreshedAt = c.UpdatedAt
		stored = true
		return nil
	})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, a.storeError(err)
	}
	if stored {
		a.log.Info("tokens stored", "connection", req.GetConnectionId(), "generation", next.GetOauth().GetGeneration(), "needs_relogin", next.GetOauth().GetNeedsRelogin())
	}
	if stored && req.GetError() == "" && !req.GetNeedsRelogin() {
		// The refused token is replaced: the cooldowns it earned (a request
		// that stopped waiting for this refresh) say nothing about the new
		// one. Rate limits and other failures are the account's, and stay.
		a.endCooldowns(ctx, machineID, req.GetConnectionId(), "token refreshed", credential.ReasonAuth)
	}
	return &corev1.StoreTokensResponse{Generation: next.GetOauth().GetGeneration(), Stored: stored}, nil
}

// maxRefreshError bounds a refresh failure's reason as a connection keeps
// it.
const maxRefreshError = 300

// refreshError is a refresh failure's reason as c keeps it and its views
// show it (Connection.refresh_error). The workers' reasons are phrases of
// their own with the token endpoint's HTTP status and OAuth error code,
// which the endpoint chooses: a run of code characters (a code is at most
// 64 of them) taken from one of c's secrets, as an endpoint echoing the
// refresh token would send, is hidden. At most maxRefreshError bytes.
func (a *Admin) refreshError(c *busv1.Connection, reason string) string {
	if len(reason) > maxRefreshError {
		reason = strings.ToValidUTF8(reason[:maxRefreshError], "")
	}
	sec, err := a.vault.Open(c)
	if err != nil {
		// Unopened secrets were handed to no refresh either.
		return reason
	}
	return secrets.HideRuns(reason, sec.GetAccessToken(), sec.GetRefreshToken(), sec.GetApiKey())
}
