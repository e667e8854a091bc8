package openai

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// olderCore answers chat only on ChatCompletions, as a core from before
// CompleteChat does (its CompleteChat is Unimplemented).
type olderCore struct {
	fakeRouter
	streamed int
}

func (c *olderCore) ChatCompletions(req *corev1.ChatCompletionsRequest, s grpc.ServerStreamingServer[corev1.ChatCompletionsResponse]) error {
	c.streamed++
	return s.Send(&corev1.ChatCompletionsResponse{Event: &corev1.ChatCompletionsResponse_Completion{Completion: []byte(`{"object":"chat.completion","answered":"whole"}`)}})
}

func serveRouter(t *testing.T, srv corev1.RouterServer) corev1.RouterClient {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	corev1.RegisterRouterServer(s, srv)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return corev1.NewRouterClient(conn)
}

// An edge in front of a core that does not know CompleteChat still answers
// whole requests, through ChatCompletions.
func TestWholeAnswerFromAnOlderCore(t *testing.T) {
	core := &olderCore{}
	h := &Chat{Router: serveRouter(t, core)}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `{"object":"chat.completion","answered":"whole"}`, w.Body.String())
	assert.Equal(t, 1, core.streamed)
}
