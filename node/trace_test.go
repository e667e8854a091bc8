package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// tracedPair is a pair whose process traces into an in-memory exporter;
// split runs the edge and core in separate processes (gRPC over the
// network between them).
func tracedPair(t *testing.T, split bool) (pair, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	opts := node.Options{TracerProvider: tp}
	var sb *nodetest.Instance
	if split {
		cfg := nodetest.Config(t.TempDir())
		cfg.NATSURL = nodetest.StartNATS(t)
		back := nodetest.StartWith(t, cfg, opts, node.RoleCore, node.RoleWorker, node.RoleBilling)
		front := cfg
		front.DataDir = t.TempDir()
		front.CoreAddr = back.Node.GRPCAddr()
		front.BillingAddr = back.Node.GRPCAddr()
		sb = nodetest.StartWith(t, front, opts, node.RoleEdge)
	} else {
		sb = nodetest.StartWith(t, nodetest.Config(t.TempDir()), opts, node.AllRoles...)
	}
	p := pair{
		sb:       sb,
		primary:  upstreamtest.New(t, upstreamtest.WithAPIKey("sk-primary")),
		fallback: upstreamtest.New(t, upstreamtest.WithAPIKey("sk-fallback")),
	}
	p.primaryID = sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "primary", "apiKey": "sk-primary", "priority": 1,
		"providerSpecificData": map[string]any{"baseUrl": p.primary.URL()}})
	p.fallbackID = sb.CreateConnection(t, map[string]any{"provider": "openai", "name": "fallback", "apiKey": "sk-fallback", "priority": 2,
		"providerSpecificData": map[string]any{"baseUrl": p.fallback.URL()}})
	return p, exp
}

// traceOf waits for the spans of the trace whose root is the edge's span
// of a chat request, and returns them.
func traceOf(t *testing.T, exp *tracetest.InMemoryExporter, want func(tracetest.SpanStubs) bool) tracetest.SpanStubs {
	t.Helper()
	var out tracetest.SpanStubs
	require.Eventually(t, func() bool {
		out = nil
		var id trace.TraceID
		spans := exp.GetSpans()
		for _, s := range spans {
			if s.Name == "POST "+routeChat {
				id = s.SpanContext.TraceID()
			}
		}
		if !id.IsValid() {
			return false
		}
		for _, s := range spans {
			if s.SpanContext.TraceID() == id {
				out = append(out, s)
			}
		}
		return want(out)
	}, 10*time.Second, 10*time.Millisecond)
	return out
}

func spansNamed(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// One request with a fallback yields one trace: the edge's span, core's
// gRPC span, the resolution, an attempt span per connection (provider and
// connection id, never the key) and an upstream call under each, whose
// traceparent each fake upstream received. In process and split alike.
func TestTraceSpansEdgeCoreAndUpstream(t *testing.T) {
	for _, mode := range []struct {
		name  string
		split bool
	}{{"serve", false}, {"split", true}} {
		t.Run(mode.name, func(t *testing.T) {
			p, exp := tracedPair(t, mode.split)
			exp.Reset()
			p.primary.Enqueue(pathChat, upstreamtest.OpenAIError(500, "server_error", "", "boom"))
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "traced", true), "traced")

			spans := traceOf(t, exp, func(s tracetest.SpanStubs) bool {
				return len(spansNamed(s, "POST "+routeChat)) == 1 && len(spansNamed(s, "switchboard.attempt")) == 2 &&
					len(spansNamed(s, "/switchboard.core.v1.Router/ChatCompletions")) == 1
			})
			edge := spansNamed(spans, "POST "+routeChat)[0]
			id := edge.SpanContext.TraceID()
			assert.False(t, edge.Parent.IsValid(), "the edge starts the trace")
			grpcSpan := spansNamed(spans, "/switchboard.core.v1.Router/ChatCompletions")[0]
			assert.Equal(t, edge.SpanContext.SpanID(), grpcSpan.Parent.SpanID(), "core continues the edge's span")
			require.Len(t, spansNamed(spans, "switchboard.resolve"), 1)

			attempts := spansNamed(spans, "switchboard.attempt")
			byConn := map[string]tracetest.SpanStub{}
			for _, a := range attempts {
				assert.Equal(t, grpcSpan.SpanContext.SpanID(), a.Parent.SpanID())
				assert.Equal(t, "openai", attr(a, "switchboard.provider"))
				byConn[attr(a, "switchboard.connection_id")] = a
				for _, kv := range a.Attributes {
					assert.NotContains(t, kv.Value.Emit(), "sk-", "no secret in a span")
				}
			}
			require.Contains(t, byConn, p.primaryID)
			require.Contains(t, byConn, p.fallbackID)
			assert.Equal(t, "server", attr(byConn[p.primaryID], "switchboard.outcome"))

			// Each upstream saw a traceparent of this trace, whose parent is
			// the client span under its attempt.
			calls := spansNamed(spans, "HTTP POST")
			require.Len(t, calls, 2)
			for _, up := range []struct {
				srv  *upstreamtest.Server
				conn string
			}{{p.primary, p.primaryID}, {p.fallback, p.fallbackID}} {
				reqs := up.srv.Requests()
				require.NotEmpty(t, reqs)
				last := reqs[len(reqs)-1]
				sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(t.Context(), propagation.HeaderCarrier(last.Header)))
				require.True(t, sc.IsValid(), "traceparent %q", last.Header.Get("Traceparent"))
				assert.Equal(t, id, sc.TraceID(), "the upstream call belongs to the request's trace")
				var parent *tracetest.SpanStub
				for i := range calls {
					if calls[i].SpanContext.SpanID() == sc.SpanID() {
						parent = &calls[i]
					}
				}
				require.NotNil(t, parent, "the traceparent names the client span")
				assert.Equal(t, byConn[up.conn].SpanContext.SpanID(), parent.Parent.SpanID(), "under its attempt")
			}
		})
	}
}

// A client's traceparent is continued, not replaced.
func TestTraceContinuesTheClientsTrace(t *testing.T) {
	p, exp := tracedPair(t, false)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := p.sb.Do(t, http.MethodPost, pathChat, map[string]any{"model": chatModel, "messages": []map[string]any{{"role": "user", "content": "hi"}}},
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	spans := traceOf(t, exp, func(s tracetest.SpanStubs) bool { return len(spansNamed(s, "switchboard.attempt")) == 1 })
	assert.Equal(t, traceID, spans[0].SpanContext.TraceID().String())
	reqs := p.primary.Requests()
	assert.Contains(t, reqs[len(reqs)-1].Header.Get("Traceparent"), traceID)
}

// Without a tracer provider nothing is traced and no traceparent goes
// upstream.
func TestTraceOffByDefault(t *testing.T) {
	p := newPair(t)
	requireAnswer(t, chatAsk(t, p.sb, chatModel, "quiet", false), "quiet")
	reqs := p.primary.Requests()
	require.NotEmpty(t, reqs)
	assert.Empty(t, reqs[len(reqs)-1].Header.Get("Traceparent"))
}

// A whole answer (CompleteChat, a unary call) continues the edge's trace in
// core's span too, in one process as over the network.
func TestTraceSpansWholeAnswer(t *testing.T) {
	for _, mode := range []struct {
		name  string
		split bool
	}{{"serve", false}, {"split", true}} {
		t.Run(mode.name, func(t *testing.T) {
			p, exp := tracedPair(t, mode.split)
			exp.Reset()
			requireAnswer(t, chatAsk(t, p.sb, chatModel, "traced whole", false), "traced whole")
			const method = "/switchboard.core.v1.Router/CompleteChat"
			spans := traceOf(t, exp, func(s tracetest.SpanStubs) bool {
				return len(spansNamed(s, "POST "+routeChat)) == 1 && len(spansNamed(s, method)) == 1 && len(spansNamed(s, "switchboard.attempt")) == 1
			})
			edge := spansNamed(spans, "POST "+routeChat)[0]
			core := spansNamed(spans, method)[0]
			assert.Equal(t, edge.SpanContext.SpanID(), core.Parent.SpanID(), "core continues the edge's span")
			assert.Equal(t, core.SpanContext.SpanID(), spansNamed(spans, "switchboard.attempt")[0].Parent.SpanID())
		})
	}
}
