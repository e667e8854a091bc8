package node_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Internal services call Router.CreateEmbeddings with typed inputs and get
// packed float vectors, with the same auth and errors as HTTP clients.
func TestEmbeddingsOverGRPC(t *testing.T) {
	p := newPair(t)
	router, ctx := routerOf(t, p)

	resp, err := router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"alpha", "beta"}})
	require.NoError(t, err)
	require.Len(t, resp.GetData(), 2)
	for i, in := range []string{"alpha", "beta"} {
		assert.Equal(t, upstreamtest.Vector(in, embedDims), resp.GetData()[i].GetVector())
	}
	assert.Equal(t, p.primaryID, resp.GetConnectionId())
	assert.Positive(t, resp.GetUsage().GetPromptTokens())
	assert.Empty(t, resp.GetJson(), "typed callers get vectors, not JSON")

	_, err = router.CreateEmbeddings(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer sk-wrong"),
		&corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"x"}})
	assert.Equal(t, codes.Unauthenticated, status.Code(err))

	_, err = router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	// Extra members must be an object that sets none of the request's own
	// fields; nothing reaches the upstream otherwise.
	for _, extra := range []string{`{"input":["y"]}`, `{"Model":"other"}`, `["x"]`, `{"a":`} {
		_, err = router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"x"}, ExtraJson: []byte(extra)})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), extra)
	}
	require.Len(t, p.primary.Requests(), 1, "only the first call reached the upstream")

	p.primary.SetDefault(pathEmbed, upstreamtest.RateLimited("20"))
	p.fallback.SetDefault(pathEmbed, upstreamtest.RateLimited("9"))
	_, err = router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"x"}})
	st := status.Convert(err)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	var reason string
	var retry time.Duration
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.RetryInfo:
			retry = d.GetRetryDelay().AsDuration()
		}
	}
	assert.Equal(t, "rate_limit_exceeded", reason)
	assert.True(t, retry >= time.Second && retry <= 9*time.Second, "retry %s", retry)
}

// Cooldowns live in KV: a connection cooled through one core replica is
// skipped by the other.
func TestCooldownsAreSharedAcrossCoreReplicas(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	secret := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	edges := make([]*nodetest.Instance, 2)
	for i := range edges {
		cfg := nodetest.Config(t.TempDir())
		cfg.NATSURL, cfg.SecretKey = natsURL, secret
		core := nodetest.Start(t, cfg, node.RoleCore)
		ecfg := nodetest.Config(t.TempDir())
		ecfg.CoreAddr = core.Node.GRPCAddr()
		edges[i] = nodetest.Start(t, ecfg, node.RoleEdge)
	}
	primary := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	fallback := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	edges[0].CreateConnection(t, map[string]any{"provider": "openai", "name": "p", "apiKey": "a", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": primary.URL()}})
	edges[0].CreateConnection(t, map[string]any{"provider": "openai", "name": "f", "apiKey": "b", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": fallback.URL()}})
	body := map[string]any{"model": embedModel, "input": "x"}
	// The second replica sees the connections through its own mirror.
	require.Eventually(t, func() bool {
		return edges[1].Do(t, http.MethodPost, pathEmbed, body).Status == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, primary.Count(pathEmbed))

	primary.Enqueue(pathEmbed, upstreamtest.RateLimited("600"))
	require.Equal(t, http.StatusOK, edges[0].Do(t, http.MethodPost, pathEmbed, body).Status)
	require.Equal(t, 2, primary.Count(pathEmbed))
	// The cooldown was stored before that answer; the other replica's
	// watcher brings it within milliseconds, and any admin call there
	// catches its mirrors up first: after one, it surely holds it.
	require.Equal(t, http.StatusOK, edges[1].Admin(t, http.MethodGet, "/api/settings", nil).Status)
	before := fallback.Count(pathEmbed)
	require.Equal(t, http.StatusOK, edges[1].Do(t, http.MethodPost, pathEmbed, body).Status)
	assert.Equal(t, before+1, fallback.Count(pathEmbed), "the other replica answers from the fallback")
	assert.Equal(t, 2, primary.Count(pathEmbed), "the other replica skips the cooled primary")
}

// An internal service that sends its key without the Bearer scheme is told
// so, as HTTP clients are: the call never runs as the default machine with
// no key, and no upstream is asked.
func TestKeyOutsideBearerRefusedOverGRPC(t *testing.T) {
	p := newPair(t)
	router, keyed := routerOf(t, p)
	md, _ := metadata.FromOutgoingContext(keyed)
	key := strings.TrimPrefix(md.Get("authorization")[0], "Bearer ")
	for _, auth := range []string{key, "Basic Zm9vOmJhcg=="} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", auth)
		_, err := router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"x"}})
		require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
		assert.Contains(t, status.Convert(err).Message(), "Bearer")
		assert.NotContains(t, status.Convert(err).Message(), key)
		var reason string
		for _, d := range status.Convert(err).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		assert.Equal(t, "invalid_api_key", reason)
	}
	// x-api-key is read after an Authorization with another scheme.
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Basic Zm9vOmJhcg==", "x-api-key", key)
	_, err := router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"x"}})
	require.NoError(t, err)
	assert.Len(t, p.primary.Requests(), 1, "only the keyed call reached the upstream")
}

// The bounds of an embeddings request hold for a gRPC caller as for an HTTP
// one: more than 2,048 inputs, or a token array longer than 65,536 ids, is
// refused in OpenAI's words before any upstream is asked.
func TestEmbeddingsInputBoundOverGRPC(t *testing.T) {
	p := newPair(t)
	router, ctx := routerOf(t, p)
	texts := make([]string, 2049)
	for i := range texts {
		texts[i] = "x"
	}
	_, err := router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: texts})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Equal(t, "array_above_max_length", errorInfoOf(err).GetReason())
	assert.Equal(t, "input", errorInfoOf(err).GetMetadata()["param"])
	assert.Equal(t, "Invalid 'input': array too long. Expected an array with maximum length 2048, but got an array with length 2049 instead.",
		status.Convert(err).Message())

	tokens := make([]*corev1.TokenList, 2049)
	for i := range tokens {
		tokens[i] = &corev1.TokenList{Tokens: []int64{1}}
	}
	_, err = router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Tokens: tokens})
	assert.Equal(t, "array_above_max_length", errorInfoOf(err).GetReason(), "%v", err)

	long := &corev1.TokenList{Tokens: make([]int64, 1<<16+1)}
	_, err = router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Tokens: []*corev1.TokenList{{Tokens: []int64{1}}, long}})
	assert.Equal(t, "array_above_max_length", errorInfoOf(err).GetReason(), "%v", err)
	assert.Equal(t, "input[1]", errorInfoOf(err).GetMetadata()["param"])
	assert.Empty(t, p.primary.Requests(), "no upstream was asked")

	_, err = router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: texts[:2048]})
	require.NoError(t, err, "2,048 inputs are within the bound")
}

// A gRPC caller learns the id its request is logged under, from the
// response headers: the one it sent (sanitised), or the one core made when
// it sent none, which the request log then lists.
func TestRequestIDOverGRPC(t *testing.T) {
	p := newPair(t)
	router, ctx := routerOf(t, p)

	var md metadata.MD
	_, err := router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"alpha"}}, grpc.Header(&md))
	require.NoError(t, err)
	require.Len(t, md.Get("x-request-id"), 1, "core's own id is sent back")
	minted := md.Get("x-request-id")[0]
	assert.NotEmpty(t, minted)

	md = nil
	long := "svc-42-" + strings.Repeat("x", 200)
	_, err = router.CreateEmbeddings(metadata.AppendToOutgoingContext(ctx, "x-request-id", long),
		&corev1.CreateEmbeddingsRequest{Model: embedModel, Texts: []string{"beta"}}, grpc.Header(&md))
	require.NoError(t, err)
	assert.Equal(t, []string{long[:128]}, md.Get("x-request-id"), "the caller's id, as it is logged (at most 128 bytes)")

	// A failed call names its id too.
	md = nil
	_, err = router.CreateEmbeddings(ctx, &corev1.CreateEmbeddingsRequest{Model: "nope/nothing", Texts: []string{"x"}}, grpc.Header(&md))
	require.Error(t, err)
	assert.Len(t, md.Get("x-request-id"), 1, "a refused call")

	stream, err := router.ChatCompletions(ctx, &corev1.ChatCompletionsRequest{Body: []byte(`{"model":"nope/nothing","messages":[{"role":"user","content":"x"}]}`)})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.Error(t, err)
	smd, err := stream.Header()
	require.NoError(t, err)
	assert.Len(t, smd.Get("x-request-id"), 1, "a stream")

	require.Eventually(t, func() bool {
		resp := p.sb.Admin(t, http.MethodGet, pathRequests, nil)
		rows, _ := resp.JSON["requests"].([]any)
		return slices.ContainsFunc(rows, func(r any) bool { return r.(map[string]any)["requestId"] == minted })
	}, 10*time.Second, 50*time.Millisecond, "the request log lists the id the caller was given")
}
