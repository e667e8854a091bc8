package node_test

import (
	"context"
	"net/http"
	"net/url"
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

// A base URL is kept in plain text and shown in every view of its
// connection, so one with credentials in it (user:password@) is refused
// on creation, validation and edit: the password would be neither sealed
// nor hidden. One stored before is shown redacted, keeps serving, and
// takes edits that send its shown form back.
func TestBaseURLWithCredentialsIsRefusedAndNeverShown(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	u, err := url.Parse(up.URL())
	require.NoError(t, err)
	u.User = url.UserPassword("lab", "hunter2-base-url-secret")
	withSecret := u.String()

	create := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai-compatible-lab", "name": "lab",
		"providerSpecificData": map[string]any{"baseUrl": withSecret}})
	require.Equal(t, http.StatusBadRequest, create.Status, "%s", create.Body)
	assert.Equal(t, "invalid_base_url", adminError(create)["code"])
	assert.NotContains(t, string(create.Body), "hunter2")
	validate := sb.Admin(t, http.MethodPost, "/api/providers/validate", map[string]any{"provider": "openai-compatible-lab",
		"providerSpecificData": map[string]any{"baseUrl": withSecret}})
	assert.Equal(t, http.StatusBadRequest, validate.Status, "%s", validate.Body)
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Empty(t, list.JSON["connections"], "nothing stored")

	// One stored before the refusal.
	machine := sb.Node.DefaultMachineID()
	id := uuid.NewString()
	data, err := proto.Marshal(&busv1.Connection{
		Id: id, MachineId: machine, Provider: "openai-compatible-lab", Name: "lab", Priority: 1, IsActive: true,
		Data:      &busv1.ProviderData{BaseUrl: withSecret, EnabledModels: []string{"text-embedding-3-small"}},
		CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(),
	})
	require.NoError(t, err)
	_, err = connectionsKV(t, sb).Create(context.Background(), machine+"."+id, data)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "openai-compatible-lab/text-embedding-3-small", "input": "x"}).Status == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)

	get := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil)
	require.Equal(t, http.StatusOK, get.Status, "%s", get.Body)
	assert.NotContains(t, string(get.Body), "hunter2")
	shown := get.JSON["connection"].(map[string]any)["providerSpecificData"].(map[string]any)["baseUrl"].(string)
	assert.True(t, strings.Contains(shown, "lab:***@"), shown)
	list = sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.NotContains(t, string(list.Body), "hunter2")

	patch := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"name": "renamed", "providerSpecificData": map[string]any{"baseUrl": shown}})
	require.Equal(t, http.StatusOK, patch.Status, "the shown form sent back is the stored URL: %s", patch.Body)
	assert.NotContains(t, string(patch.Body), "hunter2")
	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "openai-compatible-lab/text-embedding-3-small", "input": "x"})
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	edit := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"baseUrl": withSecret + "x"}})
	assert.Equal(t, http.StatusBadRequest, edit.Status, "a new base URL with credentials: %s", edit.Body)
}

// A base URL with a query or a fragment is refused: paths are appended to
// it, so the query would swallow them (POST /v1?api_key=...), and a key in
// it would be kept in plain text and shown in every view.
func TestBaseURLWithAQueryIsRefused(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	for _, base := range []string{up.URL() + "?api_key=QUERYSECRET123", up.URL() + "#QUERYSECRET123", up.URL() + "?"} {
		create := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai-compatible-lab", "name": "lab",
			"providerSpecificData": map[string]any{"baseUrl": base}})
		require.Equal(t, http.StatusBadRequest, create.Status, "%s: %s", base, create.Body)
		assert.Equal(t, "invalid_base_url", adminError(create)["code"])
		assert.NotContains(t, string(create.Body), "QUERYSECRET123")
	}
	list := sb.Admin(t, http.MethodGet, "/api/providers", nil)
	assert.Empty(t, list.JSON["connections"], "nothing stored")

	created := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai-compatible-lab", "name": "lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created.Body)
	id := created.JSON["connection"].(map[string]any)["id"].(string)
	edit := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"providerSpecificData": map[string]any{"baseUrl": up.URL() + "?api_key=QUERYSECRET123"}})
	assert.Equal(t, http.StatusBadRequest, edit.Status, "%s", edit.Body)
	validate := sb.Admin(t, http.MethodPost, "/api/providers/validate", map[string]any{"provider": "openai-compatible-lab",
		"providerSpecificData": map[string]any{"baseUrl": up.URL() + "?api_key=QUERYSECRET123"}})
	assert.Equal(t, http.StatusBadRequest, validate.Status, "%s", validate.Body)
}
