package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/edge/internal/openai"
)

// waitingConn answers every call only when its context ends, as core's
// calls do when the edge's shutdown cancels them.
type waitingConn struct{ called chan struct{} }

func (c waitingConn) Invoke(ctx context.Context, _ string, _, _ any, _ ...grpc.CallOption) error {
	close(c.called)
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

func (c waitingConn) NewStream(ctx context.Context, _ *grpc.StreamDesc, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, c.Invoke(ctx, "", nil, nil)
}

// A request the gateway serves still awaiting core's answer when the
// edge's shutdown ends it is answered 503 shutting_down, to be sent again
// elsewhere, as the edge's own routes are.
func TestCallEndedByShutdownAnswers503(t *testing.T) {
	conn := waitingConn{called: make(chan struct{})}
	mux, err := New(context.Background(), conn, nil, nil)
	require.NoError(t, err)
	ctx, end := context.WithCancelCause(context.Background())
	go func() {
		<-conn.called
		end(openai.ErrShuttingDown)
	}()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/models", nil))
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	assert.Equal(t, "shutting_down", body.Error.Code)
}
