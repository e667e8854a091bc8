package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// modelsPrefix starts both /v1/models/{kind} (a listing of one kind, served
// by grpc-gateway) and /v1/models/{id} (one model, served here).
const modelsPrefix = "/v1/models/"

// modelsRoute is the path template of the model route, what its requests
// are counted and traced under.
const modelsRoute = modelsPrefix + "{id}"

// Model is OpenAI's model object, with the model's kind.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Kind    string `json:"kind"`
}

// withModels serves GET /v1/models/{id}: OpenAI's "retrieve model", for ids
// of any shape ("prefix/model", "prefix/org/model", an alias, a combo). The
// kinds are a fixed set and keep their listing, as does /v1/models/info;
// every other path goes to next.
func withModels(next http.Handler, router corev1.RouterClient) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, modelsPrefix)
		if !ok || r.Method != http.MethodGet || id == "" || id == "info" || provider.ValidKind(id) {
			next.ServeHTTP(w, r)
			return
		}
		telemetry.SetRoute(r.Context(), modelsRoute)
		ctx, _ := openai.Outgoing(r)
		if v := r.Header.Get(contract.MDCatalogFetch); v != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, contract.MDCatalogFetch, v)
		}
		info, err := router.GetModelInfo(ctx, &corev1.GetModelInfoRequest{Id: id})
		if err != nil {
			openai.FromError(err).Write(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Model{
			ID: info.GetId(), Object: "model", Created: int64(info.GetCreated()), OwnedBy: info.GetOwnedBy(), Kind: info.GetKind(),
		})
	})
}
