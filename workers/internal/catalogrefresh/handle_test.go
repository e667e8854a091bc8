package catalogrefresh

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/switchboardhq/switchboard/internal/provider"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// fakeAdmin hands out one connection and keeps the catalogs put.
type fakeAdmin struct {
	baseURL string
	mu      sync.Mutex
	puts    []*corev1.PutCatalogRequest
	// refuse, when set, answers PutCatalog.
	refuse func(*corev1.PutCatalogRequest) error
}

func (f *fakeAdmin) GetConnectionCredentials(_ context.Context, in *corev1.GetConnectionCredentialsRequest, _ ...grpc.CallOption) (*corev1.GetConnectionCredentialsResponse, error) {
	return &corev1.GetConnectionCredentialsResponse{
		Connection: &corev1.Connection{Id: in.GetConnectionId(), Provider: "openai-compatible-x",
			ProviderSpecificData: &corev1.ProviderSpecificData{BaseUrl: f.baseURL}},
		ApiKey: "k",
	}, nil
}

func (f *fakeAdmin) PutCatalog(_ context.Context, in *corev1.PutCatalogRequest, _ ...grpc.CallOption) (*corev1.PutCatalogResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		if err := f.refuse(in); err != nil {
			return nil, err
		}
	}
	f.puts = append(f.puts, in)
	return &corev1.PutCatalogResponse{Count: int32(len(in.GetModels()))}, nil
}

func (f *fakeAdmin) last(t *testing.T) *corev1.PutCatalogRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.puts, "a catalog was stored")
	return f.puts[len(f.puts)-1]
}

// refresh runs one job against an upstream whose /models answers with
// handler, and returns what the worker stored.
func refresh(t *testing.T, handler http.HandlerFunc, admin *fakeAdmin) (*corev1.PutCatalogRequest, error) {
	t.Helper()
	up := httptest.NewServer(handler)
	t.Cleanup(up.Close)
	admin.baseURL = up.URL + "/v1"
	r := New(admin, "admin", provider.NewRegistry(), NewClients(), slog.New(slog.DiscardHandler))
	err := r.Handle(context.Background(), &busv1.CatalogRefreshJob{MachineId: "0123456789abcdef", ConnectionId: "c1"})
	if err != nil {
		return nil, err
	}
	return admin.last(t), nil
}

// An upstream that answers 200 with something other than a model list (an
// error object, as some gateways send with 200, null, an object without a
// list) failed to list its models: that is recorded as a failure, kept a
// minute and fetched again, not as an empty list kept for an hour that
// hides every model of the connection.
func TestAnswerWithoutAModelListIsAFailure(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"Invalid API key","type":"invalid_request_error"}}`,
		`null`,
		`{"object":"list"}`,
		`{"data":null}`,
		`"ok"`,
		`42`,
	} {
		t.Run(body, func(t *testing.T) {
			put, err := refresh(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
			}, &fakeAdmin{})
			require.NoError(t, err)
			assert.NotEmpty(t, put.GetError(), "stored as a failure")
			assert.Empty(t, put.GetModels())
		})
	}
	// An empty list is a list.
	put, err := refresh(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
	}, &fakeAdmin{})
	require.NoError(t, err)
	assert.Empty(t, put.GetError())
}

// A listing past the size a worker reads is refused saying so, not as an
// answer that is not JSON (it was cut at the bound and read as such).
func TestListingPastTheBoundSaysSo(t *testing.T) {
	put, err := refresh(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"data":[`))
		entry := []byte(`{"id":"a-model-with-a-name-of-some-length"},`)
		for n := 0; n < maxListing; n += len(entry) {
			if _, err := w.Write(entry); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`{"id":"last"}]}`))
	}, &fakeAdmin{})
	require.NoError(t, err)
	assert.Contains(t, put.GetError(), "larger than 16 MiB")
}

// An upstream that drops the connection in the middle of its listing is
// recorded as such, in words.
func TestListingCutShortSaysSo(t *testing.T) {
	put, err := refresh(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte(`{"data":[{"id":"a"},`))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}, &fakeAdmin{})
	require.NoError(t, err)
	t.Logf("stored error: %q", put.GetError())
	assert.NotContains(t, put.GetError(), "%!")
	assert.Contains(t, put.GetError(), "cut short")
}
