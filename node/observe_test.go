package node_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/sync/errgroup"

	"github.com/switchboardhq/switchboard/internal/provider"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

const routeChat = "POST /v1/chat/completions"

// clearCooldowns lets both connections of a pair take requests again.
func (p pair) clearCooldowns(t *testing.T) {
	t.Helper()
	for _, id := range []string{p.primaryID, p.fallbackID} {
		require.Equal(t, http.StatusOK, p.sb.Admin(t, http.MethodDelete, "/api/providers/"+id+"/cooldowns", nil).Status)
	}
}

// settled scrapes the metrics once the edge and core have counted n chat
// requests: both count after the client has its answer.
func settled(t *testing.T, sb *nodetest.Instance, n float64, more ...func(nodetest.Metrics) bool) nodetest.Metrics {
	t.Helper()
	var m nodetest.Metrics
	require.Eventually(t, func() bool {
		m = sb.Metrics(t)
		if m.Value("switchboard_http_requests_total", "route", routeChat) != n || m.Value("switchboard_requests_total") != n {
			return false
		}
		for _, f := range more {
			if !f(m) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	return m
}

// cooling waits for the cooldown records (mirrored from the bucket) to
// show n connections cooling for reason.
func cooling(reason string, n float64) func(nodetest.Metrics) bool {
	return func(m nodetest.Metrics) bool {
		return m.Value("switchboard_connections_cooling", "reason", reason) == n
	}
}

// A known sequence of requests (a fallback, a 429 exhaustion, a cut
// stream) leaves the counters and histograms a scrape of /metrics shows.
func TestMetricsAfterKnownSequence(t *testing.T) {
	p := newPair(t)
	labels := []string{"endpoint", "chat.completions", "provider", "openai", "model", "gpt-4o-mini"}
	with := func(extra ...string) []string { return append(append([]string{}, labels...), extra...) }

	// 1. A fallback: the primary answers 500, the fallback answers.
	p.primary.Enqueue(pathChat, upstreamtest.OpenAIError(500, "server_error", "", "boom"))
	p.fallback.Enqueue(pathChat, fallbackAnswer(false))
	r := chatAsk(t, p.sb, chatModel, "one", false)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	m := settled(t, p.sb, 1, cooling("server", 1))
	assert.Equal(t, 1.0, m.Value("switchboard_http_requests_total", "route", routeChat, "method", "POST", "status", "200"))
	assert.Equal(t, 1.0, m.Value("switchboard_requests_total", with("status", "200")...))
	assert.Equal(t, 1.0, m.Value("switchboard_fallbacks_total", "provider", "openai", "reason", "server"))
	assert.Equal(t, 1.0, m.Value("switchboard_upstream_attempts_total", "provider", "openai", "outcome", "server"))
	assert.Equal(t, 1.0, m.Value("switchboard_upstream_attempts_total", "provider", "openai", "outcome", "ok"))
	assert.Equal(t, 11.0, m.Value("switchboard_tokens_total", "provider", "openai", "model", "gpt-4o-mini", "kind", "prompt"))
	assert.Equal(t, 7.0, m.Value("switchboard_tokens_total", "provider", "openai", "model", "gpt-4o-mini", "kind", "completion"))
	assert.Equal(t, 1.0, m.Value("switchboard_connections_cooling", "reason", "server"), "the primary cools down")
	assert.Equal(t, 1.0, m.Value("switchboard_http_request_duration_seconds", "route", routeChat), "one observation")
	assert.Equal(t, 1.0, m.Value("switchboard_http_overhead_seconds", "route", routeChat))
	assert.Equal(t, 1.0, m.Value("switchboard_http_upstream_seconds", "route", routeChat))
	assert.Equal(t, 0.0, m.Value("switchboard_http_stream_first_byte_seconds", "route", routeChat), "not a stream")
	assert.Equal(t, 1.0, m.Value("switchboard_nats_connected"))

	// 2. A 429 exhaustion: both connections are rate limited.
	p.clearCooldowns(t)
	p.primary.Enqueue(pathChat, upstreamtest.RateLimited(""))
	p.fallback.Enqueue(pathChat, upstreamtest.RateLimited(""))
	r = chatAsk(t, p.sb, chatModel, "two", false)
	require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
	m = settled(t, p.sb, 2, cooling("rate_limited", 2))
	assert.Equal(t, 1.0, m.Value("switchboard_http_requests_total", "route", routeChat, "status", "429"))
	assert.Equal(t, 1.0, m.Value("switchboard_requests_total", with("status", "429")...))
	assert.Equal(t, 2.0, m.Value("switchboard_fallbacks_total", "provider", "openai", "reason", "rate_limited"))
	assert.Equal(t, 1.0, m.Value("switchboard_exhausted_total", "provider", "openai", "code", "rate_limit_exceeded"))
	assert.Equal(t, 2.0, m.Value("switchboard_connections_cooling", "reason", "rate_limited"), "both connections cool down")
	assert.Equal(t, 11.0, m.Value("switchboard_tokens_total", "kind", "prompt"), "a failed request bills nothing")

	// 3. A cut stream: the primary's stream breaks after two chunks, after
	// the answer started: no fallback, an in-band error.
	p.clearCooldowns(t)
	p.primary.Enqueue(pathChat, upstreamtest.CutAfter(2))
	r = chatAsk(t, p.sb, chatModel, "three four five six", true)
	require.Equal(t, http.StatusOK, r.Status)
	require.False(t, r.Done, "a cut stream does not end cleanly")
	m = settled(t, p.sb, 3)
	assert.Equal(t, 2.0, m.Value("switchboard_http_requests_total", "route", routeChat, "status", "200"), "the stream had started: 200")
	assert.Equal(t, 1.0, m.Value("switchboard_http_stream_first_byte_seconds", "route", routeChat), "one stream")
	assert.Equal(t, 3.0, m.Value("switchboard_http_request_duration_seconds", "route", routeChat))
	assert.Equal(t, 1.0, m.Value("switchboard_fallbacks_total", "provider", "openai", "reason", "network"), "the cut connection cools down")
	assert.Zero(t, p.fallback.Count(pathChat)-2, "no fallback after the first byte")
	assert.Equal(t, 3.0, m.Value("switchboard_requests_total", labels...))
	assert.Equal(t, 3.0, m.Value("switchboard_request_duration_seconds", "endpoint", "chat.completions", "provider", "openai"))

	// Every request's usage event reaches the bus.
	require.Eventually(t, func() bool {
		return p.sb.Metrics(t).Value("switchboard_usage_events_published_total") == 3
	}, 10*time.Second, 20*time.Millisecond)
	m = p.sb.Metrics(t)
	assert.Zero(t, m.Value("switchboard_usage_events_dropped_total"))
	assert.Zero(t, m.Value("switchboard_usage_events_buffered"))
	assert.Contains(t, m, "go_goroutines", "the runtime's metrics too")
	assert.Equal(t, 4.0, m.Value("switchboard_http_requests_total", "route", "DELETE /api/providers/{id}/cooldowns", "status", "200"),
		"the admin API's routes are its templates")
}

// Thousands of distinct model ids from clients add no series: unknown ids
// are "other" (passed through to an upstream) or never get a provider.
func TestMetricsCardinalityIsBounded(t *testing.T) {
	p := newPair(t)
	p.primary.SetDefault(pathChat, upstreamtest.OpenAIError(404, "invalid_request_error", "model_not_found", "no such model"))
	const n = 2000
	// Eight clients at once: the requests are many, each quick.
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		model := "gpt-" + strconv.Itoa(i)
		if i%2 == 0 {
			model = "openai/" + model // reaches the upstream by prefix
		}
		g.Go(func() error {
			body := `{"model":"` + model + `","messages":[{"role":"user","content":"x"}]}`
			resp, err := http.Post(p.sb.BaseURL+pathChat, "application/json", strings.NewReader(body))
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return fmt.Errorf("%s: 200", model)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	m := settled(t, p.sb, n)
	spec, ok := provider.NewRegistry().Lookup("openai")
	require.True(t, ok)
	allowed := map[string]bool{"other": true}
	for _, sm := range spec.Models {
		allowed[sm.ID] = true
	}
	models := m.LabelValues("switchboard_requests_total", "model")
	for model := range models {
		assert.True(t, allowed[model], "model label %q is not a client's invention", model)
	}
	assert.True(t, models["other"])
	assert.LessOrEqual(t, len(m.Series("switchboard_requests_total")), 8, "%d requests, a handful of series", n)
	assert.LessOrEqual(t, len(m.Series("switchboard_tokens_total")), 4)
	assert.LessOrEqual(t, len(m.Series("switchboard_http_requests_total")), 3, "routes are patterns, not paths")
}

// /metrics answers only the admin token.
func TestMetricsNeedTheAdminToken(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + nodetest.InternalToken, nodetest.AdminToken} {
		r := sb.Do(t, http.MethodGet, "/metrics", nil, "Authorization", auth)
		assert.Equal(t, http.StatusUnauthorized, r.Status, "Authorization %q", auth)
		assert.NotContains(t, string(r.Body), "switchboard_", "no metrics leak")
	}
	assert.Contains(t, sb.Metrics(t), "switchboard_nats_connected")
}

// In split mode core, workers and billing serve their metrics on a private
// listener, without authentication.
func TestMetricsPrivateListener(t *testing.T) {
	natsURL := nodetest.StartNATS(t)
	cfg := nodetest.Config(t.TempDir())
	cfg.NATSURL = natsURL
	cfg.MetricsAddr = "127.0.0.1:0"
	core := nodetest.Start(t, cfg, "core", "worker", "billing")
	m := nodetest.Scrape(t, "http://"+core.Node.MetricsAddr()+"/metrics", "")
	for _, name := range []string{"switchboard_nats_connected", "switchboard_usage_events_published_total"} {
		assert.Contains(t, m, name)
	}
	assert.Equal(t, 1.0, m.Value("switchboard_nats_connected"))
}

// An upstream that refuses an OAuth token makes the request wait for a
// refresh job: the refresh is counted, traced in the request's trace, and
// the job counted by the workers.
func TestObserveTokenRefresh(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t, tokensAnswer(oauthNewAccess, oauthRefresh2))
	sb := nodetest.StartWith(t, nodetest.Config(t.TempDir()), node.Options{TracerProvider: tp}, node.AllRoles...)
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())
	exp.Reset()

	requireAnswer(t, chatAsk(t, sb, "openai-compatible-oauth/gpt-4o-mini", "hi", false), "hi")
	m := settled(t, sb, 1, func(m nodetest.Metrics) bool {
		return m.Value("switchboard_jobs_total", "consumer", "token-refresh", "outcome", "processed") == 1
	})
	assert.Equal(t, 1.0, m.Value("switchboard_token_refreshes_total", "provider", "openai-compatible-oauth", "outcome", "ok"))
	assert.Equal(t, 1.0, m.Value("switchboard_upstream_attempts_total", "provider", "openai-compatible-oauth", "outcome", "auth"))
	assert.Equal(t, 1.0, m.Value("switchboard_upstream_attempts_total", "provider", "openai-compatible-oauth", "outcome", "ok"))

	spans := traceOf(t, exp, func(s tracetest.SpanStubs) bool {
		return len(spansNamed(s, "switchboard.token_refresh")) == 1 && len(spansNamed(s, "switchboard.attempt")) == 2
	})
	refresh := spansNamed(spans, "switchboard.token_refresh")[0]
	assert.Equal(t, id, attr(refresh, "switchboard.connection_id"))
	for _, s := range spans {
		for _, kv := range s.Attributes {
			assert.NotContains(t, kv.Value.Emit(), oauthNewAccess, "no token in a span")
			assert.NotContains(t, kv.Value.Emit(), oauthOldAccess, "no token in a span")
		}
	}
}
