package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"github.com/switchboardhq/switchboard/internal/inproc"
	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// router records the metadata of the calls it gets.
type router struct {
	corev1.UnimplementedRouterServer
	seen metadata.MD
}

func (r *router) ListModels(ctx context.Context, _ *corev1.ListModelsRequest) (*corev1.ListModelsResponse, error) {
	r.seen, _ = metadata.FromIncomingContext(ctx)
	return &corev1.ListModelsResponse{}, nil
}

// The contract's forwarded headers reach core; metadata only roles may set
// (the internal token, vouched users) cannot be smuggled in as
// Grpc-Metadata- headers.
func TestForwardedHeaders(t *testing.T) {
	r := &router{}
	conn := inproc.New(nil, nil)
	corev1.RegisterRouterServer(conn, r)
	mux, err := New(context.Background(), conn, nil, nil)
	require.NoError(t, err)

	req := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	for _, h := range contract.ForwardedHeaders {
		req.Header.Set(h, "v-"+h)
	}
	for _, k := range contract.InternalKeys {
		req.Header.Set("Grpc-Metadata-"+k, "forged")
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	for _, h := range contract.ForwardedHeaders {
		assert.Equal(t, []string{"v-" + h}, r.seen.Get(h), h)
	}
	for _, k := range contract.InternalKeys {
		assert.Empty(t, r.seen.Get(k), k)
	}
}

// A forwarded header grpc-gateway would drop (not printable ASCII) is
// refused instead, and core is not called: a dropped key would run the
// call keyless, a dropped machine would act on the default one.
func TestHeadersCoreCannotReceiveAreRefused(t *testing.T) {
	r := &router{}
	conn := inproc.New(nil, nil)
	corev1.RegisterRouterServer(conn, r)
	mux, err := New(context.Background(), conn, nil, nil)
	require.NoError(t, err)

	for _, c := range []struct {
		path, header, value string
		status              int
		code                string
	}{
		{"/v1/models", "X-Api-Key", "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9", http.StatusUnauthorized, "invalid_api_key"},
		{"/v1/models", "Authorization", "Bearer \xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9", http.StatusUnauthorized, "invalid_api_key"},
		{"/v1/models", "Idempotency-Key", "k\te", http.StatusBadRequest, "invalid_header"},
		{"/api/models/aliases", "Authorization", "Bearer \xe9", http.StatusUnauthorized, "invalid_admin_token"},
		{"/api/models/aliases", "X-Switchboard-Machine", "m\xc3\xa9", http.StatusBadRequest, "invalid_header"},
	} {
		r.seen = nil
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		req.Header.Set(c.header, c.value)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		assert.Equal(t, c.status, rec.Code, "%s %s: %s", c.path, c.header, rec.Body)
		assert.Contains(t, rec.Body.String(), `"code":"`+c.code+`"`, c.header)
		assert.Nil(t, r.seen, "core not called")
	}
}
