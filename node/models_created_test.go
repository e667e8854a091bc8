package node_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// A model's created in /v1/models, and when it is retrieved, is the one its
// upstream's listing gave (an alias's too), in seconds; a model whose
// upstream gave none, or none that is a time, is listed with 0, as the
// registry's models are.
func TestModelsCreatedFromTheUpstream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[
			{"id":"a","object":"model","created":1686935002,"owned_by":"x"},
			{"id":"b","object":"model","owned_by":"x"},
			{"id":"c","object":"model","created":"yesterday"},
			{"id":"d","object":"model","created":-5},
			{"id":"e","object":"model","created":1686935002000},
			{"id":"f","object":"model","created":1686935002.5}]}`)
	}))
	defer up.Close()
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-x", "name": "x", "apiKey": "k",
		"providerSpecificData": map[string]any{"baseUrl": up.URL, "prefix": "x"}})
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini"}}})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/aliases",
		map[string]any{"aliases": map[string]string{"fast": "x/a"}}).Status)
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "sdk"}).JSON["key"].(string)

	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx := context.Background()
	created := map[string]int64{}
	iter := client.Models.ListAutoPaging(ctx)
	for iter.Next() {
		created[iter.Current().ID] = iter.Current().Created
	}
	require.NoError(t, iter.Err())
	assert.Equal(t, map[string]int64{"x/a": 1686935002, "x/b": 0, "x/c": 0, "x/d": 0, "x/e": 1686935002, "x/f": 1686935002, "openai/gpt-4o-mini": 0, "fast": 1686935002}, created)

	for id, want := range map[string]int64{"x/a": 1686935002, "fast": 1686935002, "x/b": 0} {
		m, err := client.Models.Get(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, want, m.Created, id)
	}
}
