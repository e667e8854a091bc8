package node_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/node/nodetest"
)

// README: switchboard_http_requests_total's `route` is the matched pattern,
// never the path. GET /v1/models/{id} is a documented route; an unknown path
// is not. The two must not share one label.
func TestMetricsModelRetrieveRouteLabel(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "k",
		"providerSpecificData": map[string]any{"enabledModels": []string{"gpt-4o-mini"}}})
	r := sb.Do(t, http.MethodGet, "/v1/models/openai/gpt-4o-mini", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = sb.Do(t, http.MethodGet, "/no/such/path", nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	m := sb.Metrics(t)
	for _, s := range m.Series("switchboard_http_requests_total", "method", "GET") {
		for _, l := range s.GetLabel() {
			if l.GetName() == "route" {
				t.Logf("route=%q status=%v value=%v", l.GetValue(), s.GetLabel(), s.GetCounter().GetValue())
			}
		}
	}
	assert.Equal(t, 1.0, m.Value("switchboard_http_requests_total", "route", "GET /v1/models/{id}", "status", "200"),
		"the retrieve-model route is counted under its pattern")
	assert.Zero(t, m.Value("switchboard_http_requests_total", "route", "/", "status", "200"),
		"a 200 is not counted under the catch-all '/' that unknown paths' 404s also use")
}
