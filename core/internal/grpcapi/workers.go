package grpcapi

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/store"
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
	e, err := a.connection(machineID, req.GetConnectionId())
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
	}, nil
}

// PutCatalog stores a connection's fetched model list (or the failure to
// fetch it).
func (a *Admin) PutCatalog(ctx context.Context, req *corev1.PutCatalogRequest) (*corev1.PutCatalogResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := a.connection(machineID, req.GetConnectionId()); err != nil {
		return nil, err
	}
	now := a.now()
	cat := &busv1.Catalog{
		MachineId:    machineID,
		ConnectionId: req.GetConnectionId(),
		FetchedAt:    timestamppb.New(now),
		ExpiresAt:    timestamppb.New(now.Add(spine.CatalogTTL)),
	}
	if req.GetError() != "" {
		cat.Error = req.GetError()
		cat.ExpiresAt = timestamppb.New(now.Add(CatalogErrorTTL))
	} else {
		cat.Models = req.GetModels()
	}
	if err := a.store.Catalogs.Put(ctx, store.ConnectionKey(machineID, req.GetConnectionId()), cat); err != nil {
		return nil, a.storeError(err)
	}
	return &corev1.PutCatalogResponse{Count: int32(len(cat.Models))}, nil
}
