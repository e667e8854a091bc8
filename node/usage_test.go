package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

const pathUsageStats = "/api/usage/stats"

// loggedEvent is a usage event with the SB_USAGE stream sequence of its
// message.
type loggedEvent struct {
	seq uint64
	ev  *busv1.UsageEvent
}

// usageLog reads every usage event published so far, with its message's
// sequence, batches expanded.
func usageLog(t *testing.T, sb *nodetest.Instance) []loggedEvent {
	t.Helper()
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, spine.StreamUsage, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var out []loggedEvent
	for {
		batch, err := cons.FetchNoWait(256)
		require.NoError(t, err)
		n := 0
		for msg := range batch.Messages() {
			md, err := msg.Metadata()
			require.NoError(t, err)
			// A message is one event or a batch of them.
			parts, err := usagebatch.Split(msg.Headers(), msg.Data())
			require.NoError(t, err)
			for _, p := range parts {
				ev := &busv1.UsageEvent{}
				require.NoError(t, proto.Unmarshal(p, ev))
				out = append(out, loggedEvent{seq: md.Sequence.Stream, ev: ev})
			}
			n++
		}
		if n == 0 {
			return out
		}
	}
}

// counts are the counters of a stats row, as the HTTP API answers them.
type counts struct {
	Requests, Errors, Prompt, Completion, Total, Cached, Reasoning float64
	latencySum                                                     float64
}

func (c *counts) add(ev *busv1.UsageEvent) {
	c.Requests++
	if ev.GetStatus() >= 400 {
		c.Errors++
	}
	c.Prompt += float64(ev.GetPromptTokens())
	c.Completion += float64(ev.GetCompletionTokens())
	c.Total += float64(ev.GetTotalTokens())
	c.Cached += float64(ev.GetCachedTokens())
	c.Reasoning += float64(ev.GetReasoningTokens())
	c.latencySum += float64(ev.GetLatencyMs())
}

func countsOf(t *testing.T, row map[string]any) (counts, float64) {
	t.Helper()
	num := func(k string) float64 {
		v, ok := row[k].(float64)
		require.True(t, ok, "%s is not a JSON number in %v", k, row)
		return v
	}
	return counts{
		Requests: num("requests"), Errors: num("errors"), Prompt: num("promptTokens"), Completion: num("completionTokens"),
		Total: num("totalTokens"), Cached: num("cachedTokens"), Reasoning: num("reasoningTokens"),
	}, num("avgLatencyMs")
}

// expectStats checks a stats answer against the events, row by row.
func expectStats(t *testing.T, stats map[string]any, evs []*busv1.UsageEvent) {
	t.Helper()
	var total counts
	by := map[string]map[string]*counts{}
	dims := map[string]func(*busv1.UsageEvent) string{
		"byProvider":   (*busv1.UsageEvent).GetProvider,
		"byModel":      (*busv1.UsageEvent).GetModel,
		"byConnection": (*busv1.UsageEvent).GetConnectionId,
		"byKey":        (*busv1.UsageEvent).GetKeyId,
		"byEndpoint":   (*busv1.UsageEvent).GetEndpoint,
	}
	for _, ev := range evs {
		total.add(ev)
		for dim, keyOf := range dims {
			if by[dim] == nil {
				by[dim] = map[string]*counts{}
			}
			k := keyOf(ev)
			if by[dim][k] == nil {
				by[dim][k] = &counts{}
			}
			by[dim][k].add(ev)
		}
	}
	check := func(what string, want counts, row map[string]any) {
		got, avg := countsOf(t, row)
		wantAvg := want.latencySum / want.Requests
		want.latencySum = 0
		assert.Equal(t, want, got, what)
		assert.InDelta(t, wantAvg, avg, 1e-9, "%s average latency", what)
	}
	totals, ok := stats["totals"].(map[string]any)
	require.True(t, ok, "no totals in %v", stats)
	check("totals", total, totals)
	for dim := range dims {
		rows, ok := stats[dim].([]any)
		require.True(t, ok, "no %s in %v", dim, stats)
		assert.Len(t, rows, len(by[dim]), dim)
		for _, r := range rows {
			row := r.(map[string]any)
			key, _ := row["key"].(string)
			want := by[dim][key]
			if !assert.NotNil(t, want, "%s has a row %q no event has", dim, key) {
				continue
			}
			check(dim+" "+key, *want, row)
		}
	}
}

func statsRow(t *testing.T, stats map[string]any, dim, key string) map[string]any {
	t.Helper()
	rows, _ := stats[dim].([]any)
	for _, r := range rows {
		if row := r.(map[string]any); row["key"] == key {
			return row
		}
	}
	return nil
}

func TestUsageRollupsMatchTheEvents(t *testing.T) {
	start := time.Now().UTC()
	p := newPair(t)
	key := p.sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "reports"})
	require.Equal(t, http.StatusCreated, key.Status, "%s", key.Body)
	rawKey, keyID := key.JSON["key"].(string), key.JSON["id"].(string)
	embed := func(input string, headers ...string) nodetest.Response {
		return p.sb.Do(t, http.MethodPost, pathEmbed, map[string]any{"model": embedModel, "input": input}, headers...)
	}

	// Four answered by the primary, two of them with a key.
	for _, in := range []string{"one", "two words"} {
		r := embed(in, "Authorization", "Bearer "+rawKey)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	p.primary.Enqueue(pathEmbed, upstreamtest.SlowFirstByte(40*time.Millisecond)) // some latency to average
	for _, in := range []string{"three little words", "four"} {
		require.Equal(t, http.StatusOK, embed(in).Status)
	}
	// A fallback: the primary's failed attempt bills nobody.
	p.primary.Enqueue(pathEmbed, upstreamtest.OpenAIError(500, "server_error", "", "boom"))
	r := embed("fallback answers this one")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, 1, p.fallback.Count(pathEmbed))
	require.Equal(t, http.StatusOK, p.sb.Admin(t, http.MethodDelete, "/api/providers/"+p.primaryID+"/cooldowns", nil).Status)
	// A client error passed through from the primary.
	p.primary.Enqueue(pathEmbed, upstreamtest.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "too long"))
	require.Equal(t, http.StatusBadRequest, embed("much too long").Status)
	// Every connection failing: an error, recorded on the last one tried.
	p.primary.Enqueue(pathEmbed, upstreamtest.Overloaded())
	p.fallback.Enqueue(pathEmbed, upstreamtest.OpenAIError(500, "server_error", "", "fallback broke"))
	require.Equal(t, http.StatusInternalServerError, embed("nobody answers").Status)
	const sent = 7

	var logged []loggedEvent
	require.Eventually(t, func() bool { logged = usageLog(t, p.sb); return len(logged) == sent }, 10*time.Second, 20*time.Millisecond)
	evs := make([]*busv1.UsageEvent, len(logged))
	for i, l := range logged {
		evs[i] = l.ev
	}

	var stats nodetest.Response
	require.Eventually(t, func() bool {
		stats = p.sb.Admin(t, http.MethodGet, pathUsageStats+"?period=today", nil)
		tot, _ := stats.JSON["totals"].(map[string]any)
		return stats.Status == http.StatusOK && tot["requests"] == float64(sent)
	}, 20*time.Second, 50*time.Millisecond, "the worker rolls the events up")

	t.Run("rollup totals match the events", func(t *testing.T) {
		assert.Equal(t, "today", stats.JSON["period"])
		from, err := time.Parse(time.RFC3339Nano, stats.JSON["from"].(string))
		require.NoError(t, err)
		to, err := time.Parse(time.RFC3339Nano, stats.JSON["to"].(string))
		require.NoError(t, err)
		assert.True(t, from.Equal(start.Truncate(24*time.Hour)), "from %s is the UTC midnight", from)
		assert.False(t, to.Before(start))
		expectStats(t, stats.JSON, evs)
		assert.GreaterOrEqual(t, stats.JSON["totals"].(map[string]any)["avgLatencyMs"], 40.0/sent)
	})

	t.Run("failed attempts are not billed to the failing connection", func(t *testing.T) {
		// The primary was called 7 times: 4 answers, a 500 before the
		// fallback, the passed-through 400 and a 503.
		assert.Equal(t, 7, p.primary.Count(pathEmbed))
		primary := statsRow(t, stats.JSON, "byConnection", p.primaryID)
		require.NotNil(t, primary)
		assert.Equal(t, "primary", primary["name"])
		assert.Equal(t, float64(5), primary["requests"], "four answers and the 400 it gave the client")
		assert.Equal(t, float64(1), primary["errors"])
		fallback := statsRow(t, stats.JSON, "byConnection", p.fallbackID)
		require.NotNil(t, fallback)
		assert.Equal(t, float64(2), fallback["requests"], "the request it answered and the last failure")
		assert.Equal(t, float64(1), fallback["errors"])
		var fallbackTokens float64
		for _, ev := range evs {
			if ev.GetConnectionId() == p.fallbackID {
				fallbackTokens += float64(ev.GetPromptTokens())
			}
		}
		assert.Positive(t, fallbackTokens)
		assert.Equal(t, fallbackTokens, fallback["promptTokens"], "the fallback's answer is billed to the fallback")
		withKey := statsRow(t, stats.JSON, "byKey", keyID)
		require.NotNil(t, withKey)
		assert.Equal(t, float64(2), withKey["requests"])
		assert.Equal(t, "reports", withKey["name"])
		assert.Equal(t, float64(2), statsRow(t, stats.JSON, "byEndpoint", "embeddings")["errors"])
	})

	t.Run("periods", func(t *testing.T) {
		for _, period := range []string{"", "24h", "7d", "30d"} {
			if time.Now().UTC().Truncate(24*time.Hour) != start.Truncate(24*time.Hour) && period == "" {
				continue // the UTC day ended during the test
			}
			resp := p.sb.Admin(t, http.MethodGet, pathUsageStats+"?period="+period, nil)
			require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
			want := period
			if want == "" {
				want = "today"
			}
			assert.Equal(t, want, resp.JSON["period"])
			expectStats(t, resp.JSON, evs)
		}
	})

	t.Run("bad period: 400 in the OpenAI shape", func(t *testing.T) {
		resp := p.sb.Admin(t, http.MethodGet, pathUsageStats+"?period=1y", nil)
		require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
		assert.Equal(t, "invalid_period", errorCode(resp))
		assert.Equal(t, "invalid_request_error", errorType(resp))
		assert.Equal(t, "period", resp.JSON["error"].(map[string]any)["param"])
	})

	t.Run("admin only, per machine", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, p.sb.Do(t, http.MethodGet, pathUsageStats, nil).Status)
		assert.Equal(t, http.StatusUnauthorized, p.sb.Do(t, http.MethodGet, pathUsageStats, nil, "Authorization", "Bearer "+rawKey).Status)
		m := p.sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "other"})
		require.Equal(t, http.StatusCreated, m.Status)
		other := p.sb.Admin(t, http.MethodGet, pathUsageStats+"?period=30d", nil, "X-Switchboard-Machine", m.JSON["machine"].(map[string]any)["id"].(string))
		require.Equal(t, http.StatusOK, other.Status, "%s", other.Body)
		assert.Equal(t, float64(0), other.JSON["totals"].(map[string]any)["requests"])
		assert.Empty(t, other.JSON["byConnection"])
	})

	t.Run("a redelivery does not double count", func(t *testing.T) {
		conn, err := grpc.NewClient(p.sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
		admin := corev1.NewAdminClient(conn)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+nodetest.AdminToken)

		// The worker's batch again, as after a worker died between core's
		// write and its acknowledgement.
		redelivered := &corev1.UsageDelta{MachineId: p.sb.Node.DefaultMachineID()}
		for _, l := range logged {
			at := l.ev.GetTime().AsTime().UTC()
			redelivered.Day = at.Format("2006-01-02")
			redelivered.Sequences = append(redelivered.Sequences, l.seq)
			redelivered.Rows = append(redelivered.Rows, &busv1.UsageRow{
				Hour: int32(at.Hour()), Provider: l.ev.GetProvider(), Model: l.ev.GetModel(), ConnectionId: l.ev.GetConnectionId(),
				KeyId: l.ev.GetKeyId(), Endpoint: l.ev.GetEndpoint(),
				Counters: &busv1.UsageCounters{Requests: 1, PromptTokens: l.ev.GetPromptTokens(), TotalTokens: l.ev.GetTotalTokens()},
			})
		}
		for range 2 {
			resp, err := admin.ApplyUsage(ctx, &corev1.ApplyUsageRequest{Deltas: []*corev1.UsageDelta{redelivered}})
			require.NoError(t, err)
			assert.EqualValues(t, 0, resp.GetApplied())
			assert.EqualValues(t, 1, resp.GetDuplicates())
		}

		// A new batch applied twice counts once; one mixing it with a new
		// event is refused whole, to be sent again per event.
		base := uint64(1) << 40
		day := time.Now().UTC()
		fresh := &corev1.UsageDelta{
			MachineId: p.sb.Node.DefaultMachineID(), Day: day.Format("2006-01-02"), Sequences: []uint64{base, base + 1},
			Rows: []*busv1.UsageRow{{Hour: int32(day.Hour()), Provider: "openai", Model: "text-embedding-3-small", ConnectionId: p.primaryID,
				Endpoint: "embeddings", Counters: &busv1.UsageCounters{Requests: 2, PromptTokens: 100, TotalTokens: 100, LatencyMs: 4}}},
		}
		resp, err := admin.ApplyUsage(ctx, &corev1.ApplyUsageRequest{Deltas: []*corev1.UsageDelta{fresh}})
		require.NoError(t, err)
		assert.EqualValues(t, 1, resp.GetApplied())
		resp, err = admin.ApplyUsage(ctx, &corev1.ApplyUsageRequest{Deltas: []*corev1.UsageDelta{fresh, redelivered}})
		require.NoError(t, err)
		assert.EqualValues(t, 0, resp.GetApplied())
		assert.EqualValues(t, 2, resp.GetDuplicates())
		mixed := proto.Clone(fresh).(*corev1.UsageDelta)
		mixed.Sequences = []uint64{base + 1, base + 2}
		resp, err = admin.ApplyUsage(ctx, &corev1.ApplyUsageRequest{Deltas: []*corev1.UsageDelta{mixed}})
		require.NoError(t, err)
		assert.Equal(t, []int32{0}, resp.GetSplit())
		assert.EqualValues(t, 0, resp.GetApplied())

		after := p.sb.Admin(t, http.MethodGet, pathUsageStats+"?period=24h", nil)
		require.Equal(t, http.StatusOK, after.Status)
		totals := after.JSON["totals"].(map[string]any)
		assert.Equal(t, float64(sent+2), totals["requests"], "the fresh batch once, the redelivered one not again")
		var prompt float64
		for _, ev := range evs {
			prompt += float64(ev.GetPromptTokens())
		}
		assert.Equal(t, prompt+100, totals["promptTokens"])

		_, err = admin.ApplyUsage(ctx, &corev1.ApplyUsageRequest{Deltas: []*corev1.UsageDelta{{MachineId: "nope", Day: "2026-01-01", Sequences: []uint64{1}}}})
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
		_, err = admin.ApplyUsage(context.Background(), &corev1.ApplyUsageRequest{})
		assert.Equal(t, codes.Unauthenticated, status.Code(err))
	})
}
