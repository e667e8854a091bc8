package node_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

const (
	embedModel = "openai/text-embedding-3-small"
	embedDims  = 4
	pathEmbed  = "/v1/embeddings"
)

// pair is a serve instance with two OpenAI connections: a primary
// (priority 1) and a fallback (priority 2), each on its own fake upstream.
type pair struct {
	sb                    *nodetest.Instance
	primary, fallback     *upstreamtest.Server
	primaryID, fallbackID string
}

func newPair(t *testing.T) pair {
	t.Helper()
	p := pair{
		sb:       nodetest.Serve(t, t.TempDir()),
		primary:  upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithAPIKey("sk-primary")),
		fallback: upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithAPIKey("sk-fallback")),
	}
	p.primaryID = p.sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "primary", "apiKey": "sk-primary", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": p.primary.URL()}})
	p.fallbackID = p.sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "fallback", "apiKey": "sk-fallback", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": p.fallback.URL()}})
	return p
}

func (p pair) embed(t *testing.T, input string) nodetest.Response {
	t.Helper()
	return p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": input})
}

func vectorOf(t *testing.T, r nodetest.Response, i int) []float64 {
	t.Helper()
	data, ok := r.JSON["data"].([]any)
	require.True(t, ok, "no data in %s", r.Body)
	raw := data[i].(map[string]any)["embedding"]
	switch v := raw.(type) {
	case []any:
		out := make([]float64, len(v))
		for j, f := range v {
			out[j] = f.(float64)
		}
		return out
	case string:
		b, err := base64.StdEncoding.DecodeString(v)
		require.NoError(t, err)
		out := make([]float64, len(b)/4)
		for j := range out {
			out[j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])))
		}
		return out
	}
	t.Fatalf("embedding of unexpected type %T", raw)
	return nil
}

func expected(input string) []float64 {
	v := upstreamtest.Vector(input, embedDims)
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}

// usageEvents reads every usage event published so far, batches expanded.
func usageEvents(t *testing.T, sb *nodetest.Instance) []*busv1.UsageEvent {
	t.Helper()
	var out []*busv1.UsageEvent
	for _, l := range usageLog(t, sb) {
		out = append(out, l.ev)
	}
	return out
}

func TestEmbeddingsWithOfficialGoClient(t *testing.T) {
	p := newPair(t)
	client := sdk(t, p.sb)

	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: embedModel,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first text", "second text"}},
	})
	require.NoError(t, err)
	require.Len(t, resp.Data, 2)
	for i, in := range []string{"first text", "second text"} {
		assert.EqualValues(t, i, resp.Data[i].Index)
		assert.InDeltaSlice(t, expected(in), resp.Data[i].Embedding, 1e-6)
	}
	assert.Positive(t, resp.Usage.PromptTokens)
	assert.Equal(t, "list", string(resp.Object))

	// The upstream got the upstream model id and the primary's key.
	reqs := p.primary.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "Bearer sk-primary", reqs[0].Header.Get("Authorization"))
	var sent map[string]any
	require.NoError(t, json.Unmarshal(reqs[0].Body, &sent))
	assert.Equal(t, "text-embedding-3-small", sent["model"])

	// Errors arrive as the SDK's typed errors.
	_, err = client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "acme/nope", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Equal(t, "model_not_found", apiErr.Code)
}

func TestEmbeddingsFormats(t *testing.T) {
	p := newPair(t)
	for _, format := range []string{"float", "base64"} {
		t.Run(format, func(t *testing.T) {
			r := p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "hello world", "encoding_format": format})
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			assert.InDeltaSlice(t, expected("hello world"), vectorOf(t, r, 0), 1e-6)
			if format == "base64" {
				assert.IsType(t, "", r.JSON["data"].([]any)[0].(map[string]any)["embedding"])
			}
			assert.Equal(t, "list", r.JSON["object"])
			assert.NotEmpty(t, r.Header.Get("X-Switchboard-Overhead-Us"))
			assert.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
		})
	}
	t.Run("token arrays are passed through", func(t *testing.T) {
		r := p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": [][]int{{1, 2, 3}, {4, 5}}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Len(t, r.JSON["data"], 2)
		last := p.primary.Requests()[len(p.primary.Requests())-1]
		assert.Contains(t, string(last.Body), `[[1,2,3],[4,5]]`)
	})
	t.Run("dimensions and user are passed through", func(t *testing.T) {
		r := p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "x", "dimensions": 2, "user": "u-1"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Len(t, vectorOf(t, r, 0), 2)
		last := p.primary.Requests()[len(p.primary.Requests())-1]
		assert.Contains(t, string(last.Body), `"dimensions":2`)
		assert.Contains(t, string(last.Body), `"user":"u-1"`)
	})
}

// An upstream that ignores encoding_format and always answers floats still
// gives a base64 client base64, and the other way round.
func TestEmbeddingsNormalisesUpstreamFormat(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t)
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "l",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})

	floats := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-0.25,1]}],"model":"nomic","usage":{"prompt_tokens":3,"total_tokens":3}}`
	up.Enqueue(pathEmbed, upstreamtest.Status(http.StatusOK, floats, "Content-Type", "application/json"))
	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "local/nomic", "input": "x", "encoding_format": "base64"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, []float64{0.5, -0.25, 1}, vectorOf(t, r, 0))
	assert.EqualValues(t, 3, r.JSON["usage"].(map[string]any)["prompt_tokens"])

	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, math.Float32bits(0.75))
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(-2))
	b64 := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"` + base64.StdEncoding.EncodeToString(b) + `"}],"model":"nomic","usage":{"prompt_tokens":1,"total_tokens":1}}`
	up.Enqueue(pathEmbed, upstreamtest.Status(http.StatusOK, b64, "Content-Type", "application/json"))
	r = sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "local/nomic", "input": "x"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, []any{0.75, -2.0}, r.JSON["data"].([]any)[0].(map[string]any)["embedding"])

	// Garbage with a 200 is the upstream's fault: a clear 502, not a crash.
	up.Enqueue(pathEmbed, upstreamtest.Status(http.StatusOK, `<html>oops</html>`))
	r = sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "local/nomic", "input": "x"})
	assert.Equal(t, http.StatusBadGateway, r.Status, "%s", r.Body)
}

// The failure scenarios of reference/failover.md that apply to a
// non-streaming call, each against a primary that misbehaves and a healthy
// fallback.
func TestEmbeddingsFailover(t *testing.T) {
	t.Run("1 429 with Retry-After: fallback answers, primary cooled then used again", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.RateLimited("1"))
		r := p.embed(t, "a")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, 1, p.fallback.Count(pathEmbed))
		r = p.embed(t, "b")
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, 1, p.primary.Count(pathEmbed), "the primary is cooling down")
		require.Eventually(t, func() bool {
			p.embed(t, "c")
			return p.primary.Count(pathEmbed) == 2
		}, 10*time.Second, 100*time.Millisecond, "the primary is used again after its Retry-After")
	})
	t.Run("2 429 without Retry-After: fallback answers, primary on backoff", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.RateLimited(""))
		require.Equal(t, http.StatusOK, p.embed(t, "a").Status)
		require.Equal(t, http.StatusOK, p.embed(t, "b").Status)
		assert.Equal(t, 1, p.primary.Count(pathEmbed))
		assert.Equal(t, 2, p.fallback.Count(pathEmbed))
	})
	t.Run("3 500 once: no error to the client", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.OpenAIError(500, "server_error", "", "The server had an error"))
		r := p.embed(t, "a")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.InDeltaSlice(t, expected("a"), vectorOf(t, r, 0), 1e-6)
	})
	t.Run("4 503 always: fallback answers, no call storm to the primary", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.SetDefault(pathEmbed, upstreamtest.Overloaded())
		for i := range 10 {
			require.Equal(t, http.StatusOK, p.embed(t, strconv.Itoa(i)).Status)
		}
		assert.Equal(t, 1, p.primary.Count(pathEmbed), "the cooled primary is not called again")
		assert.Equal(t, 10, p.fallback.Count(pathEmbed))
	})
	t.Run("5 TCP reset before any byte", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.ResetBeforeBytes())
		require.Equal(t, http.StatusOK, p.embed(t, "a").Status)
		assert.Equal(t, 1, p.fallback.Count(pathEmbed))
	})
	t.Run("6 accepts and never answers: fallback within the first-byte timeout", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.Hang())
		start := time.Now()
		r := p.embed(t, "a")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, 1, p.fallback.Count(pathEmbed))
		assert.Less(t, time.Since(start), 20*time.Second, "far below a client's timeout")
	})
	t.Run("7 slow first byte below the timeout: no needless fallback", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.SlowFirstByte(300*time.Millisecond))
		require.Equal(t, http.StatusOK, p.embed(t, "a").Status)
		assert.Zero(t, p.fallback.Count(pathEmbed))
	})
	for _, tc := range []struct{ name, code, msg string }{
		{"12 400 context length exceeded: passed through, no fallback, no cooldown", "context_length_exceeded", "This model's maximum context length is 8192 tokens"},
		{"13 400 content filter: passed through, no fallback, no cooldown", "content_filter", "The input was rejected by the content filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPair(t)
			p.primary.Enqueue(pathEmbed, upstreamtest.OpenAIError(400, "invalid_request_error", tc.code, tc.msg))
			r := p.embed(t, "a")
			require.Equal(t, http.StatusBadRequest, r.Status)
			assert.Equal(t, tc.code, errorCode(r))
			assert.Equal(t, tc.msg, r.JSON["error"].(map[string]any)["message"], "the upstream's body as it wrote it")
			assert.Zero(t, p.fallback.Count(pathEmbed))
			require.Equal(t, http.StatusOK, p.embed(t, "b").Status)
			assert.Equal(t, 2, p.primary.Count(pathEmbed), "no cooldown")
		})
	}
	t.Run("14 every connection rate limited: 429 with Retry-After", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.SetDefault(pathEmbed, upstreamtest.RateLimited("30"))
		p.fallback.SetDefault(pathEmbed, upstreamtest.RateLimited("5"))
		r := p.embed(t, "a")
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
		assert.Equal(t, "rate_limit_error", errorType(r))
		assert.Equal(t, "rate_limit_exceeded", errorCode(r))
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		require.NoError(t, err)
		assert.True(t, ra >= 1 && ra <= 5, "Retry-After %d is the earliest cooldown end", ra)
		// While both cool, no upstream is called at all.
		calls := p.primary.Count(pathEmbed) + p.fallback.Count(pathEmbed)
		r = p.embed(t, "b")
		assert.Equal(t, http.StatusTooManyRequests, r.Status)
		assert.Equal(t, calls, p.primary.Count(pathEmbed)+p.fallback.Count(pathEmbed))
	})
	t.Run("15 primary flaps: traffic returns to it", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.RateLimited("1"))
		require.Equal(t, http.StatusOK, p.embed(t, "a").Status)
		require.Eventually(t, func() bool {
			p.embed(t, "b")
			return p.primary.Count(pathEmbed) >= 2
		}, 10*time.Second, 100*time.Millisecond)
		before := p.fallback.Count(pathEmbed)
		require.Equal(t, http.StatusOK, p.embed(t, "c").Status)
		assert.Equal(t, before, p.fallback.Count(pathEmbed), "the recovered primary serves again")
	})
	t.Run("16 fallback answered: usage names the answering connection", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.OpenAIError(500, "server_error", "", "boom"))
		r := p.embed(t, "billable words here")
		require.Equal(t, http.StatusOK, r.Status)
		var evs []*busv1.UsageEvent
		require.Eventually(t, func() bool { evs = usageEvents(t, p.sb); return len(evs) == 1 }, 5*time.Second, 20*time.Millisecond,
			"one usage event per request, not per attempt")
		ev := evs[0]
		assert.Equal(t, p.fallbackID, ev.GetConnectionId())
		assert.Equal(t, "openai", ev.GetProvider())
		assert.Equal(t, "text-embedding-3-small", ev.GetModel())
		assert.Equal(t, "embeddings", ev.GetEndpoint())
		assert.EqualValues(t, 200, ev.GetStatus())
		assert.EqualValues(t, 2, ev.GetAttempts())
		assert.EqualValues(t, r.JSON["usage"].(map[string]any)["prompt_tokens"], ev.GetPromptTokens())
		assert.Equal(t, p.sb.Node.DefaultMachineID(), ev.GetMachineId())
	})
	t.Run("19 mixed errors everywhere: the last upstream error with its status", func(t *testing.T) {
		t.Parallel()
		p := newPair(t)
		p.primary.Enqueue(pathEmbed, upstreamtest.Overloaded())
		p.fallback.Enqueue(pathEmbed, upstreamtest.OpenAIError(500, "server_error", "", "fallback broke"))
		r := p.embed(t, "a")
		require.Equal(t, http.StatusInternalServerError, r.Status, "%s", r.Body)
		assert.Equal(t, "fallback broke", r.JSON["error"].(map[string]any)["message"])
	})
	t.Run("no upstream reachable: 502 in the OpenAI shape", func(t *testing.T) {
		t.Parallel()
		sb := nodetest.Serve(t, t.TempDir())
		sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "dead", "apiKey": "k",
			"providerSpecificData": map[string]any{"baseUrl": "http://127.0.0.1:1/v1"}})
		r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": "a"})
		require.Equal(t, http.StatusBadGateway, r.Status)
		assert.Equal(t, "upstream_unreachable", errorCode(r))
		assert.Equal(t, "api_error", errorType(r))
	})
}

// Every row of the interface's error table that embeddings can hit.
func TestEmbeddingsErrorTable(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-o",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	sb.CreateConnection(t, map[string]any{"provider": "anthropic-compatible-claude", "name": "c", "apiKey": "sk-a",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "claude", "enabledModels": []string{"claude-embed"}}})
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		param  string
	}{
		{"body is not JSON", `{"model":`, 400, "invalid_json", ""},
		{"body is a JSON array", `[1,2]`, 400, "invalid_json", ""},
		{"model missing", `{"input":"x"}`, 400, "missing_required_parameter", "model"},
		{"model not a string", `{"model":7,"input":"x"}`, 400, "invalid_type", "model"},
		{"model unresolvable", `{"model":"acme/thing","input":"x"}`, 400, "model_not_found", "model"},
		{"bare model unknown", `{"model":"no-such-model","input":"x"}`, 400, "model_not_found", "model"},
		{"input missing", `{"model":"openai/text-embedding-3-small"}`, 400, "missing_required_parameter", "input"},
		{"input a number", `{"model":"openai/text-embedding-3-small","input":5}`, 400, "invalid_type", "input"},
		{"input an object", `{"model":"openai/text-embedding-3-small","input":{"a":1}}`, 400, "invalid_type", "input"},
		{"input mixed array", `{"model":"openai/text-embedding-3-small","input":["a",1]}`, 400, "invalid_type", "input"},
		{"input empty string", `{"model":"openai/text-embedding-3-small","input":""}`, 400, "invalid_value", "input"},
		{"input empty array", `{"model":"openai/text-embedding-3-small","input":[]}`, 400, "invalid_value", "input"},
		{"encoding_format invalid", `{"model":"openai/text-embedding-3-small","input":"x","encoding_format":"int8"}`, 400, "invalid_value", "encoding_format"},
		{"dimensions invalid", `{"model":"openai/text-embedding-3-small","input":"x","dimensions":0}`, 400, "invalid_value", "dimensions"},
		{"no credentials for the provider", `{"model":"openrouter/openai/text-embedding-3-small","input":"x"}`, 400, "no_credentials", "model"},
		{"provider unsupported for embeddings", `{"model":"claude/claude-embed","input":"x"}`, 400, "unsupported_provider", "model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sb.Do(t, http.MethodPost, pathEmbed, tc.body)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			assert.Equal(t, "invalid_request_error", errorType(r))
			assert.Equal(t, tc.code, errorCode(r), "%s", r.Body)
			if tc.param != "" {
				assert.Equal(t, tc.param, r.JSON["error"].(map[string]any)["param"])
			}
		})
	}
	assert.Zero(t, up.Count(pathEmbed), "bad input never reaches an upstream")
}

func TestEmbeddingsAuthAndLegacyPath(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims))
	sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "o", "apiKey": "sk-o",
		"providerSpecificData": map[string]any{"baseUrl": up.URL()}})
	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "k"}).JSON["key"].(string)
	machine := sb.Node.DefaultMachineID()

	other := sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "other"})
	otherID := other.JSON["machine"].(map[string]any)["id"].(string)
	otherKey := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "k2"}, "X-Switchboard-Machine", otherID).JSON["key"].(string)

	body := map[string]any{"model": embedModel, "input": "x"}
	cases := []struct {
		name    string
		path    string
		headers []string
		status  int
		code    string
	}{
		{"no key, keys optional", pathEmbed, nil, 200, ""},
		{"valid key", pathEmbed, []string{"Authorization", "Bearer " + key}, 200, ""},
		{"x-api-key", pathEmbed, []string{"x-api-key", key}, 200, ""},
		{"x-goog-api-key", pathEmbed, []string{"x-goog-api-key", key}, 200, ""},
		{"invalid key", pathEmbed, []string{"Authorization", "Bearer sk-nope"}, 401, "invalid_api_key"},
		{"key of a machine without connections", pathEmbed, []string{"Authorization", "Bearer " + otherKey}, 400, "no_credentials"},
		{"legacy path with its machine's key", "/" + machine + "/v1/embeddings", []string{"Authorization", "Bearer " + key}, 200, ""},
		{"legacy path, malformed machine id", "/NOT-A-MACHINE/v1/embeddings", []string{"Authorization", "Bearer " + key}, 400, "invalid_machine_id"},
		{"legacy path, key missing", "/" + machine + "/v1/embeddings", nil, 401, "missing_api_key"},
		{"legacy path, key of another machine", "/" + machine + "/v1/embeddings", []string{"Authorization", "Bearer " + otherKey}, 401, "invalid_api_key"},
		{"legacy path, unknown key", "/" + machine + "/v1/embeddings", []string{"Authorization", "Bearer sk-0123456789abcdef-abc123-deadbeef"}, 401, "invalid_api_key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sb.Do(t, http.MethodPost, tc.path, body, tc.headers...)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			if tc.code != "" {
				assert.Equal(t, tc.code, errorCode(r))
			}
		})
	}

	t.Run("REQUIRE_API_KEY on", func(t *testing.T) {
		require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": true}).Status)
		r := sb.Do(t, http.MethodPost, pathEmbed, body)
		assert.Equal(t, http.StatusUnauthorized, r.Status)
		assert.Equal(t, "authentication_error", errorType(r))
		assert.Equal(t, http.StatusOK, sb.Do(t, http.MethodPost, pathEmbed, body, "Authorization", "Bearer "+key).Status)
	})

	t.Run("CORS preflight", func(t *testing.T) {
		for _, path := range []string{pathEmbed, "/" + machine + "/v1/embeddings"} {
			r := sb.Do(t, http.MethodOptions, path, nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST",
				"Access-Control-Request-Headers", "authorization, content-type")
			assert.Equal(t, http.StatusNoContent, r.Status, path)
			assert.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
			assert.Contains(t, r.Header.Get("Access-Control-Allow-Methods"), "POST")
			assert.Contains(t, strings.ToLower(r.Header.Get("Access-Control-Allow-Headers")), "authorization")
		}
	})
}

// A connection without an API key presents its OAuth access token
// (interface 4.2, embeddings rule 2).
func TestEmbeddingsUseAccessTokenWithoutAPIKey(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	up := upstreamtest.New(t, upstreamtest.WithEmbeddingDims(embedDims), upstreamtest.WithAPIKey("access-123"))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-sub", "name": "sub",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "sub"},
		"oauth":                map[string]any{"accessToken": "access-123", "refreshToken": "r", "tokenUrl": "http://127.0.0.1:1/token"}})
	r := sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": "sub/e5", "input": "x"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "Bearer access-123", up.Requests()[0].Header.Get("Authorization"))
}

func TestClearCooldowns(t *testing.T) {
	p := newPair(t)
	p.primary.Enqueue(pathEmbed, upstreamtest.RateLimited("600"))
	require.Equal(t, http.StatusOK, p.embed(t, "a").Status)
	require.Equal(t, http.StatusOK, p.embed(t, "b").Status)
	assert.Equal(t, 1, p.primary.Count(pathEmbed), "cooling for ten minutes")
	r := p.sb.Admin(t, http.MethodDelete, "/api/providers/"+p.primaryID+"/cooldowns", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.EqualValues(t, 1, r.JSON["cleared"])
	require.Equal(t, http.StatusOK, p.embed(t, "c").Status)
	assert.Equal(t, 2, p.primary.Count(pathEmbed), "used again at once")
}

// Members the gateway does not read itself (NVIDIA's input_type and
// truncate, Jina's task: what the official clients send as extra body
// fields) reach the upstream as the client sent them, after the gateway's
// own.
func TestEmbeddingsPassProviderMembersOn(t *testing.T) {
	p := newPair(t)
	client := sdk(t, p.sb)

	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: embedModel,
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("first text")},
	}, option.WithJSONSet("input_type", "query"), option.WithJSONSet("truncate", "END"),
		option.WithJSONSet("task", map[string]any{"name": "retrieval", "late_chunking": true}))
	require.NoError(t, err)
	require.Len(t, resp.Data, 1)

	reqs := p.primary.Requests()
	require.Len(t, reqs, 1)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(reqs[0].Body, &sent))
	assert.Equal(t, "query", sent["input_type"])
	assert.Equal(t, "END", sent["truncate"])
	assert.Equal(t, map[string]any{"name": "retrieval", "late_chunking": true}, sent["task"])
	assert.Equal(t, "text-embedding-3-small", sent["model"], "the upstream's model id, not the client's")
	assert.Equal(t, 1, strings.Count(string(reqs[0].Body), `"model"`), "each member once: %s", reqs[0].Body)

	// A body without such members is sent as before, with none.
	r := p.sb.Do(t, http.MethodPost, "/v1/embeddings", `{"model":"`+embedModel+`","input":"x"}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	reqs = p.primary.Requests()
	sent = nil
	require.NoError(t, json.Unmarshal(reqs[len(reqs)-1].Body, &sent))
	assert.ElementsMatch(t, []string{"model", "input", "encoding_format"}, slices.Collect(maps.Keys(sent)))
}
