package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// routerOf is a Router client of p's gateway over gRPC, and a context that
// carries a gateway key.
func routerOf(t *testing.T, p pair) (corev1.RouterClient, context.Context) {
	t.Helper()
	key := gatewayKey(t, p.sb)
	conn, err := grpc.NewClient(p.sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return corev1.NewRouterClient(conn), metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
}

// Internal callers get Messages and Responses on the one ChatCompletions
// RPC that carries the dialect: named events streamed, whole answers, and
// the same errors (a bad request, a stream broken after its first event).
func TestDialectsOverGRPC(t *testing.T) {
	p := newPair(t)
	router, ctx := routerOf(t, p)

	read := func(req *corev1.ChatCompletionsRequest) ([]string, [][]byte, error) {
		stream, err := router.ChatCompletions(ctx, req)
		require.NoError(t, err)
		var names []string
		var data [][]byte
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return names, data, nil
			}
			if err != nil {
				return names, data, err
			}
			names = append(names, m.GetEventName())
			if c := m.GetCompletion(); c != nil {
				data = append(data, c)
			} else {
				data = append(data, m.GetChunk())
			}
		}
	}
	body, _ := json.Marshal(messagesBody(chatModel, "hello grpc", true))
	names, _, err := read(&corev1.ChatCompletionsRequest{Body: body, Dialect: corev1.ChatDialect_CHAT_DIALECT_MESSAGES})
	require.NoError(t, err)
	assert.Equal(t, "message_start", names[0])
	assert.Equal(t, "message_stop", names[len(names)-1])

	names, data, err := read(&corev1.ChatCompletionsRequest{Body: []byte(`{"model":"` + chatModel + `","input":"hello grpc"}`),
		Dialect: corev1.ChatDialect_CHAT_DIALECT_RESPONSES})
	require.NoError(t, err)
	require.Len(t, data, 1, "a whole answer is one message")
	assert.Equal(t, []string{""}, names)
	assert.Contains(t, string(data[0]), "echo: hello grpc")

	_, _, err = read(&corev1.ChatCompletionsRequest{Body: []byte(`{"model":"` + chatModel + `","messages":[]}`),
		Dialect: corev1.ChatDialect_CHAT_DIALECT_MESSAGES})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	p.primary.Enqueue(pathResponses, upstreamtest.CutAfter(4))
	names, _, err = read(&corev1.ChatCompletionsRequest{Body: []byte(`{"model":"` + chatModel + `","input":"a long answer please","stream":true}`),
		Dialect: corev1.ChatDialect_CHAT_DIALECT_RESPONSES})
	require.Error(t, err, "a broken stream ends with an error status, never a clean end")
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, "response.created", names[0])

	count, err := router.CountTokens(ctx, &corev1.CountTokensRequest{Body: []byte(`{"model":"` + chatModel + `","messages":[{"role":"user","content":"count me"}]}`)})
	require.NoError(t, err)
	assert.Contains(t, string(count.GetBody()), "input_tokens")
}

// CompleteChat answers a request that is not streamed in one call, in every
// dialect, with the upstream's time in its header; a streaming request is
// refused before any upstream is called.
func TestCompleteChatOverGRPC(t *testing.T) {
	p := newPair(t)
	router, ctx := routerOf(t, p)

	for _, tc := range []struct {
		dialect corev1.ChatDialect
		body    string
		want    string
	}{
		{corev1.ChatDialect_CHAT_DIALECT_UNSPECIFIED, `{"model":"` + chatModel + `","messages":[{"role":"user","content":"hello whole"}]}`, `"chat.completion"`},
		{corev1.ChatDialect_CHAT_DIALECT_MESSAGES, `{"model":"` + chatModel + `","max_tokens":64,"messages":[{"role":"user","content":"hello whole"}]}`, `"type":"message"`},
		{corev1.ChatDialect_CHAT_DIALECT_RESPONSES, `{"model":"` + chatModel + `","input":"hello whole"}`, `"object":"response"`},
	} {
		var md metadata.MD
		resp, err := router.CompleteChat(ctx, &corev1.CompleteChatRequest{Body: []byte(tc.body), Dialect: tc.dialect}, grpc.Header(&md))
		require.NoError(t, err, "%s", tc.dialect)
		assert.Contains(t, string(resp.GetCompletion()), "echo: hello whole", "%s", tc.dialect)
		assert.Contains(t, string(resp.GetCompletion()), tc.want, "%s", tc.dialect)
		assert.NotEmpty(t, md.Get("x-switchboard-upstream-us"), "%s", tc.dialect)
	}

	before := p.primary.Count(pathChat)
	_, err := router.CompleteChat(ctx, &corev1.CompleteChatRequest{Body: []byte(`{"model":"` + chatModel + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`)})
	require.Error(t, err)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "stream")
	assert.Equal(t, before, p.primary.Count(pathChat), "no upstream was called")

	bogus := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer sk-not-a-key")
	_, err = router.CompleteChat(bogus, &corev1.CompleteChatRequest{Body: []byte(`{"model":"` + chatModel + `","messages":[{"role":"user","content":"hi"}]}`)})
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "API keys are checked as on ChatCompletions")
}

// The edge sends a request it reads as not streamed on CompleteChat; when
// core reads the body otherwise (JSON keys differ only in case: the edge's
// decoding folds case, core's does not), core declines before calling any
// upstream and the edge streams as asked.
func TestChatStreamFlagReadAsCoreReadsIt(t *testing.T) {
	p := newPair(t)
	for _, tc := range []struct {
		body   string
		stream bool
	}{
		{`{"model":"` + chatModel + `","messages":[{"role":"user","content":"hi"}],"stream":true,"Stream":false}`, true},
		{`{"model":"` + chatModel + `","messages":[{"role":"user","content":"hi"}],"stream":false}`, false},
	} {
		resp := p.sb.Do(t, http.MethodPost, pathChat, tc.body)
		require.Equal(t, http.StatusOK, resp.Status, "%s: %s", tc.body, resp.Body)
		if tc.stream {
			assert.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream", tc.body)
			assert.Contains(t, string(resp.Body), "data: [DONE]", tc.body)
		} else {
			assert.Contains(t, resp.Header.Get("Content-Type"), "application/json", tc.body)
		}
	}
}

// errorInfoOf is the ErrorInfo a gRPC status carries, or an empty one.
func errorInfoOf(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return &errdetails.ErrorInfo{}
}

// A GetResponse without an id is the caller's mistake, named as
// GetModelInfo names a missing id, not a response that was not found.
func TestGetResponseWithoutIDOverGRPC(t *testing.T) {
	p := newPair(t)
	router, ctx := routerOf(t, p)
	_, err := router.GetResponse(ctx, &corev1.GetResponseRequest{})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Equal(t, "missing_required_parameter", errorInfoOf(err).GetReason())
	assert.Equal(t, "id", errorInfoOf(err).GetMetadata()["param"])

	_, err = router.GetResponse(ctx, &corev1.GetResponseRequest{Id: "resp_unknown"})
	assert.Equal(t, codes.NotFound, status.Code(err), "an id that names no stored answer is still not found")
}

// A gRPC caller's body that is not text is refused as the HTTP routes
// refuse it, before any upstream sees it: bytes that are not UTF-8, or a
// lone UTF-16 surrogate escape, in every dialect and both calls.
func TestBodyNotTextRefusedOverGRPC(t *testing.T) {
	p := newPair(t)
	router, ctx := routerOf(t, p)
	for name, text := range map[string]string{"not utf-8": "caf\xe9", "lone surrogate": `\ud800 alone`} {
		for _, d := range []struct {
			dialect corev1.ChatDialect
			body    string
		}{
			{corev1.ChatDialect_CHAT_DIALECT_UNSPECIFIED, `{"model":"` + chatModel + `","messages":[{"role":"user","content":"` + text + `"}]}`},
			{corev1.ChatDialect_CHAT_DIALECT_MESSAGES, `{"model":"` + chatModel + `","max_tokens":16,"messages":[{"role":"user","content":"` + text + `"}]}`},
			{corev1.ChatDialect_CHAT_DIALECT_RESPONSES, `{"model":"` + chatModel + `","input":"` + text + `"}`},
		} {
			_, err := router.CompleteChat(ctx, &corev1.CompleteChatRequest{Body: []byte(d.body), Dialect: d.dialect})
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s %s: %v", name, d.dialect, err)
			assert.Equal(t, "invalid_encoding", errorInfoOf(err).GetReason(), "%s %s", name, d.dialect)
			stream, err := router.ChatCompletions(ctx, &corev1.ChatCompletionsRequest{Body: []byte(d.body), Dialect: d.dialect})
			require.NoError(t, err)
			_, err = stream.Recv()
			assert.Equal(t, "invalid_encoding", errorInfoOf(err).GetReason(), "%s %s streamed", name, d.dialect)
		}
	}
	assert.Empty(t, p.primary.Requests(), "no upstream saw them")
	assert.Empty(t, p.fallback.Requests())
}
