package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

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

	listingsMu sync.Mutex
	// listings are ListModels' answers, each kept with the catalog listing
	// it was built from and answered again while the lister returns that
	// same listing (it builds a new one whenever what it lists changed).
	// An answer is shared by the calls it is given to: read-only.
	listings map[listingKey]builtListing
}

type listingKey struct {
	machine, kind string
	noFetch       bool
}

type builtListing struct {
	models []catalog.Model
	resp   *corev1.ListModelsResponse
}

// maxListings bounds the answers kept (one per machine and kind); past it
// they are dropped and built again, as the lister does with its own.
const maxListings = 4096

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
		return nil, notFound("unknown_kind", fmt.Sprintf("unknown model kind '%s'", req.GetKind()))
	}
	key := listingKey{machine: p.MachineID, kind: req.GetKind(), noFetch: mdValue(ctx, MDCatalogFetch) != ""}
	models := r.Catalog.List(ctx, key.machine, catalog.Options{Kind: key.kind, NoFetch: key.noFetch})
	r.listingsMu.Lock()
	built, ok := r.listings[key]
	r.listingsMu.Unlock()
	if ok && sameListing(built.models, models) {
		return built.resp, nil
	}
	out := &corev1.ListModelsResponse{Object: "list", Data: make([]*corev1.ModelEntry, len(models))}
	for i, m := range models {
		out.Data[i] = &corev1.ModelEntry{Id: m.ID, Object: "model", OwnedBy: m.OwnedBy, Kind: m.Kind}
	}
	r.listingsMu.Lock()
	if r.listings == nil || len(r.listings) >= maxListings {
		r.listings = make(map[listingKey]builtListing)
	}
	r.listings[key] = builtListing{models: models, resp: out}
	r.listingsMu.Unlock()
	return out, nil
}

// sameListing reports whether a and b are the same listing of the catalog
// lister: the same slice, not merely equal contents (a kept answer holds
// its listing, so no other slice can take its place in memory).
func sameListing(a, b []catalog.Model) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
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
		return out, nil
	}
	return nil, notFound("model_not_found", fmt.Sprintf("the model '%s' does not exist or no connection of this machine serves it", req.GetId()))
}
