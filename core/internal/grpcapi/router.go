package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/switchboardhq/switchboard/core/internal/audio"
	"github.com/switchboardhq/switchboard/core/internal/catalog"
	"github.com/switchboardhq/switchboard/core/internal/chat"
	"github.com/switchboardhq/switchboard/core/internal/embeddings"
	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// MDCatalogFetch marks a request made by another instance's catalog fetch
// (the loop-breaker of decisions.md): it is never answered with models that
// would need a fetch of their own.
const MDCatalogFetch = contract.MDCatalogFetch

// MDUpstreamUs is response metadata: microseconds spent waiting on
// upstreams, which the edge leaves out of its overhead figure.
const MDUpstreamUs = contract.MDUpstreamUs

// UsageRecorder takes usage events without waiting on the bus.
type UsageRecorder interface {
	Record(*busv1.UsageEvent)
}

// Router implements corev1.RouterServer.
type Router struct {
	corev1.UnimplementedRouterServer
	RouterDeps
}

// RouterDeps are the services behind the Router's calls.
type RouterDeps struct {
	Auth       *Authenticator
	Catalog    *catalog.Lister
	Embeddings *embeddings.Service
	Chat       *chat.Service
	Audio      *audio.Service
	// Caveman returns the terse-output level of a machine's request on a
	// connection ("" for off).
	Caveman func(machineID string, c *busv1.Connection) string
	Usage   UsageRecorder
	Log     *slog.Logger
	// Metrics counts requests, latencies and tokens (nil: not counted).
	Metrics *RequestMetrics
}

var _ corev1.RouterServer = (*Router)(nil)

// NewRouter returns the Router service.
func NewRouter(deps RouterDeps) *Router {
	return &Router{RouterDeps: deps}
}

// ListModels lists the models the caller's machine can reach.
func (r *Router) ListModels(ctx context.Context, req *corev1.ListModelsRequest) (*corev1.ListModelsResponse, error) {
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetKind() != "" && !provider.ValidKind(req.GetKind()) {
		return nil, invalidParam("kind", "invalid_value", fmt.Sprintf("unknown model kind '%s'", req.GetKind()))
	}
	// The answer is built once for each listing the lister keeps, and
	// shared by the calls answered with it: read-only.
	out := r.Catalog.Render(ctx, p.MachineID, catalog.Options{Kind: req.GetKind(), NoFetch: mdValue(ctx, MDCatalogFetch) != ""}, listingAnswer)
	return out.(*corev1.ListModelsResponse), nil
}

// listingAnswer is ListModels' answer for a listing.
func listingAnswer(models []catalog.Model) any {
	out := &corev1.ListModelsResponse{Object: "list", Data: make([]*corev1.ModelEntry, len(models))}
	for i, m := range models {
		out.Data[i] = &corev1.ModelEntry{Id: m.ID, Object: "model", OwnedBy: m.OwnedBy, Kind: m.Kind, Created: modelCreated(m)}
	}
	return out
}

// modelCreated is a listed model's created as OpenAI's clients read it, in 32
// bits (the catalog's, which its fetch keeps only when it fits), else 0.
func modelCreated(m catalog.Model) uint32 {
	if m.Created <= 0 || m.Created > math.MaxUint32 {
		return 0
	}
	return uint32(m.Created)
}

// endpoints are the routes that serve each kind.
var endpoints = map[string]string{
	provider.KindLLM:       "/v1/chat/completions",
	provider.KindEmbedding: "/v1/embeddings",
	provider.KindTTS:       "/v1/audio/speech",
	provider.KindSTT:       "/v1/audio/transcriptions",
	provider.KindImage:     "/v1/images/generations",
}

// GetModelInfo describes one model of the caller's listing.
func (r *Router) GetModelInfo(ctx context.Context, req *corev1.GetModelInfoRequest) (*corev1.GetModelInfoResponse, error) {
	p, err := r.Auth.Gateway(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() == "" {
		return nil, missingParam("id")
	}
	if req.GetKind() != "" && !provider.ValidKind(req.GetKind()) {
		return nil, invalidParam("kind", "invalid_value", fmt.Sprintf("unknown model kind '%s'", req.GetKind()))
	}
	for _, m := range r.Catalog.List(ctx, p.MachineID, catalog.Options{Kind: req.GetKind(), NoFetch: mdValue(ctx, MDCatalogFetch) != ""}) {
		if m.ID != req.GetId() {
			continue
		}
		out := &corev1.GetModelInfoResponse{
			Id: m.ID, Name: m.Name, Kind: m.Kind, OwnedBy: m.OwnedBy, Endpoint: endpoints[m.Kind],
			InputModalities: m.Input, OutputModalities: m.Output, Provider: m.Provider,
		}
		if m.ContextWindow > 0 {
			cw := int32(m.ContextWindow)
			out.ContextWindow = &cw
		}
		if m.Dimensions > 0 {
			d := int32(m.Dimensions)
			out.Dimensions = &d
		}
		if c := modelCreated(m); c > 0 {
			out.Created = &c
		}
		return out, nil
	}
	return nil, notFound("model_not_found", fmt.Sprintf("the model '%s' does not exist or no connection of this machine serves it", req.GetId()))
}
