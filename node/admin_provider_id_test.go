package node_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// The suffix of a compatible provider id becomes the model prefix of a
// connection that sets none, so it follows the prefix rule: a slash would
// list model ids that routing reads differently. Nothing is stored.
func TestCompatibleProviderIDOutsideThePrefixRuleIsRefused(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	for _, tc := range []struct{ name, provider string }{
		{"slash", "openai-compatible-my/lab"},
		{"space", "openai-compatible-a b"},
		{"markup", "openai-compatible-<script>"},
		{"too long", "openai-compatible-" + strings.Repeat("x", 5000)},
		{"anthropic slash", "anthropic-compatible-a/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/api/providers", "/api/providers/validate"} {
				r := sb.Admin(t, http.MethodPost, path, map[string]any{"provider": tc.provider, "name": "n", "apiKey": "k",
					"providerSpecificData": map[string]any{"baseUrl": up.URL(), "enabledModels": []string{"text-embedding-3-small"}}})
				require.Equal(t, http.StatusBadRequest, r.Status, "%s: %.300s", path, r.Body)
				e, _ := r.JSON["error"].(map[string]any)
				assert.Equal(t, "invalid_value", e["code"], path)
				assert.Equal(t, "provider", e["param"], path)
				assert.Equal(t, "invalid_request_error", e["type"], path)
			}
		})
	}
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	require.Equal(t, http.StatusOK, list.Status)
	assert.Empty(t, list.JSON["connections"])
	assert.Empty(t, sb.ModelIDs(t))

	// One that follows the rule is taken, and what it lists is usable.
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-my.lab_2", "name": "lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "enabledModels": []string{"text-embedding-3-small"}}})
	const id = "openai-compatible-my.lab_2/text-embedding-3-small"
	assert.Contains(t, sb.ModelIDs(t), id)
	e := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": id, "input": "x"})
	assert.Equal(t, http.StatusOK, e.Status, "%s", e.Body)
}

// A connection stored before provider ids were checked keeps loading and
// serving under its id, and can still be edited and deleted.
func TestStoredConnectionWithAnUncheckedProviderIDKeepsWorking(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	machine := sb.Node.DefaultMachineID()
	id := uuid.NewString()
	c := &busv1.Connection{
		Id: id, MachineId: machine, Provider: "openai-compatible-my lab", Name: "lab", Priority: 1, IsActive: true,
		Data:      &busv1.ProviderData{BaseUrl: up.URL(), EnabledModels: []string{"text-embedding-3-small"}},
		CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(),
	}
	data, err := proto.Marshal(c)
	require.NoError(t, err)
	_, err = connectionsKV(t, sb).Create(context.Background(), machine+"."+id, data)
	require.NoError(t, err)

	const model = "openai-compatible-my lab/text-embedding-3-small"
	require.Eventually(t, func() bool {
		return sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": model, "input": "x"}).Status == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	get := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil)
	require.Equal(t, http.StatusOK, get.Status, "%s", get.Body)
	assert.Equal(t, "openai-compatible-my lab", get.JSON["connection"].(map[string]any)["provider"])

	patch := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"prefix": "lab"}})
	require.Equal(t, http.StatusOK, patch.Status, "%s", patch.Body)
	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "lab/text-embedding-3-small", "input": "x"})
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	del := sb.Admin(t, http.MethodDelete, "/api/providers/"+id, nil)
	assert.Equal(t, http.StatusOK, del.Status, "%s", del.Body)
}
