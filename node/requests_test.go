package node_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

const pathRequests = "/api/usage/requests"

// requestPage is one answer of GET /api/usage/requests.
type requestPage struct {
	ids     []string
	seqs    []float64
	next    string
	scanned float64
}

func listRequests(t *testing.T, sb *nodetest.Instance, q url.Values, headers ...string) requestPage {
	t.Helper()
	resp := sb.Admin(t, http.MethodGet, pathRequests+"?"+q.Encode(), nil, headers...)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var p requestPage
	rows, _ := resp.JSON["requests"].([]any)
	for _, r := range rows {
		m := r.(map[string]any)
		p.ids = append(p.ids, m["requestId"].(string))
		require.Equal(t, "ev-"+strings.TrimPrefix(m["requestId"].(string), "req-"), m["eventId"], "the gateway's own event id is listed beside the client's request id")
		p.seqs = append(p.seqs, m["sequence"].(float64))
	}
	p.next, _ = resp.JSON["nextCursor"].(string)
	p.scanned, _ = resp.JSON["scanned"].(float64)
	return p
}

// allRequests follows the cursor to the end, bounded.
func allRequests(t *testing.T, sb *nodetest.Instance, q url.Values, headers ...string) []string {
	t.Helper()
	var ids []string
	for range 100 {
		p := listRequests(t, sb, q, headers...)
		ids = append(ids, p.ids...)
		if p.next == "" {
			return ids
		}
		q.Set("cursor", p.next)
	}
	t.Fatal("the cursor never ended")
	return nil
}

// TestRequestLogFiltersAndPages publishes usage events as core does (one
// subject per machine) and reads them back through the admin API: newest
// first, each exactly once across pages, filtered by key, model,
// connection, provider, status and time, and never another machine's.
func TestRequestLogFiltersAndPages(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	other := sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "team-b"})
	require.Equal(t, http.StatusCreated, other.Status, "%s", other.Body)
	otherID := other.JSON["machine"].(map[string]any)["id"].(string)
	mine := sb.Node.DefaultMachineID()

	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, models, conns, provs := []string{"k1", "k2"}, []string{"m1", "m2", "m3"}, []string{"c1", "c2"}, []string{"openai", "groq"}
	statuses := []int32{200, 200, 429, 500, 400}
	var published []*busv1.UsageEvent // mine, oldest first
	const n = 137
	for i := range n {
		machine := mine
		if i%10 == 9 {
			machine = otherID // interleaved with mine in the stream
		}
		ev := &busv1.UsageEvent{
			RequestId: fmt.Sprintf("req-%03d", i), EventId: fmt.Sprintf("ev-%03d", i), MachineId: machine,
			KeyId: keys[i%2], Model: models[i%3], ConnectionId: conns[i%4/2], Provider: provs[i%4/2],
			Endpoint: "chat.completions", Status: statuses[i%5], TotalTokens: int64(i),
			Time: timestamppb.Now(), // stored just after, as core publishes
		}
		data, err := proto.Marshal(ev)
		require.NoError(t, err)
		_, err = js.Publish(ctx, spine.SubjectUsage+"."+machine, data)
		require.NoError(t, err)
		if machine == mine {
			published = append(published, ev)
		}
	}
	// expect lists the request ids of my events that match, newest first.
	expect := func(match func(i int, ev *busv1.UsageEvent) bool) []string {
		var ids []string
		for i := len(published) - 1; i >= 0; i-- {
			if match(i, published[i]) {
				ids = append(ids, published[i].GetRequestId())
			}
		}
		return ids
	}
	since, until := published[30].GetTime().AsTime(), published[60].GetTime().AsTime()
	all := expect(func(int, *busv1.UsageEvent) bool { return true })

	t.Run("pages newest first, each once", func(t *testing.T) {
		first := listRequests(t, sb, url.Values{"limit": {"25"}})
		require.Len(t, first.ids, 25)
		assert.Equal(t, all[:25], first.ids)
		assert.NotEmpty(t, first.next)
		for i := 1; i < len(first.seqs); i++ {
			assert.Greater(t, first.seqs[i-1], first.seqs[i], "newest first")
		}
		assert.Equal(t, all, allRequests(t, sb, url.Values{"limit": {"25"}}))
		assert.Equal(t, all, allRequests(t, sb, url.Values{"limit": {"7"}}))
		assert.Equal(t, all[:50], listRequests(t, sb, url.Values{}).ids, "50 by default")
	})
	t.Run("filters", func(t *testing.T) {
		cases := []struct {
			name  string
			q     url.Values
			match func(ev *busv1.UsageEvent) bool
		}{
			{"key", url.Values{"keyId": {"k2"}}, func(ev *busv1.UsageEvent) bool { return ev.GetKeyId() == "k2" }},
			{"model", url.Values{"model": {"m3"}}, func(ev *busv1.UsageEvent) bool { return ev.GetModel() == "m3" }},
			{"connection", url.Values{"connectionId": {"c2"}}, func(ev *busv1.UsageEvent) bool { return ev.GetConnectionId() == "c2" }},
			{"provider", url.Values{"provider": {"groq"}}, func(ev *busv1.UsageEvent) bool { return ev.GetProvider() == "groq" }},
			{"status code", url.Values{"status": {"429"}}, func(ev *busv1.UsageEvent) bool { return ev.GetStatus() == 429 }},
			{"status class", url.Values{"status": {"4xx"}}, func(ev *busv1.UsageEvent) bool { return ev.GetStatus()/100 == 4 }},
			{"errors", url.Values{"status": {"error"}}, func(ev *busv1.UsageEvent) bool { return ev.GetStatus() >= 400 }},
			{"key and model", url.Values{"keyId": {"k1"}, "model": {"m1"}}, func(ev *busv1.UsageEvent) bool {
				return ev.GetKeyId() == "k1" && ev.GetModel() == "m1"
			}},
			{"time window", url.Values{"since": {since.Format(time.RFC3339Nano)}, "until": {until.Format(time.RFC3339Nano)}},
				func(ev *busv1.UsageEvent) bool {
					at := ev.GetTime().AsTime()
					return !at.Before(since) && !at.After(until)
				}},
			{"nothing", url.Values{"model": {"none"}}, func(*busv1.UsageEvent) bool { return false }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				want := expect(func(_ int, ev *busv1.UsageEvent) bool { return tc.match(ev) })
				q := url.Values{"limit": {"10"}}
				for k, v := range tc.q {
					q[k] = v
				}
				assert.Equal(t, want, allRequests(t, sb, q))
			})
		}
	})
	t.Run("a call reads a bounded part of the stream", func(t *testing.T) {
		p := listRequests(t, sb, url.Values{"limit": {"5"}})
		assert.Len(t, p.ids, 5)
		assert.LessOrEqual(t, p.scanned, float64(n))
		assert.Positive(t, p.scanned)
	})
	t.Run("another machine sees only its own", func(t *testing.T) {
		ids := allRequests(t, sb, url.Values{"limit": {"100"}}, "X-Switchboard-Machine", otherID)
		assert.Len(t, ids, n/10)
		for _, id := range ids {
			assert.NotContains(t, all, id)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, q := range []string{"limit=501", "limit=-1", "status=teapot", "status=99", "cursor=abc",
			"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z"} {
			resp := sb.Admin(t, http.MethodGet, pathRequests+"?"+q, nil)
			assert.Equal(t, http.StatusBadRequest, resp.Status, "%s: %s", q, resp.Body)
			assert.Contains(t, resp.JSON, "error", q)
		}
		// The cursor is named as the answer names it.
		resp := sb.Admin(t, http.MethodGet, pathRequests+"?cursor=abc", nil)
		assert.Contains(t, resp.JSON["error"].(map[string]any)["message"], "nextCursor")
		resp = sb.Do(t, http.MethodGet, pathRequests, nil)
		assert.Equal(t, http.StatusUnauthorized, resp.Status)
	})
}

// TestRequestLogExpandsBatches reads a stream mixing messages of one event
// and batch messages (as core publishes under load): every event is listed
// once, newest first (a batch's later events first), across pages that end
// inside batches, and a plain sequence cursor (as answered before batches)
// still continues below its message.
func TestRequestLogExpandsBatches(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	mine := sb.Node.DefaultMachineID()
	const otherID = "fedcba9876543210"
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var all []string // my request ids, oldest first
	i := 0
	newEvent := func(machine string) []byte {
		ev := &busv1.UsageEvent{RequestId: fmt.Sprintf("req-%03d", i), EventId: fmt.Sprintf("ev-%03d", i), MachineId: machine,
			Model: "m", Endpoint: "chat.completions", Status: 200, Time: timestamppb.Now()}
		i++
		if machine == mine {
			all = append(all, ev.RequestId)
		}
		data, err := proto.Marshal(ev)
		require.NoError(t, err)
		return data
	}
	var batchSeq uint64 // of the first batch of mine
	send := func(machine string, n int) {
		msg := nats.NewMsg(spine.SubjectUsage + "." + machine)
		if n == 1 {
			msg.Data = newEvent(machine)
		} else {
			for range n {
				msg.Data = usagebatch.Append(msg.Data, newEvent(machine))
			}
			usagebatch.SetHeader(msg.Header, n)
		}
		ack, err := js.PublishMsg(ctx, msg)
		require.NoError(t, err)
		if n > 1 && machine == mine && batchSeq == 0 {
			batchSeq = ack.Sequence
		}
	}
	send(mine, 1)
	send(mine, 1)
	send(mine, 10)
	send(otherID, 4)
	send(mine, 1)
	send(mine, 5)
	send(mine, 1)
	slices.Reverse(all) // newest first
	require.Len(t, all, 19)

	for _, limit := range []string{"4", "3", "7", "50"} {
		t.Run("limit "+limit, func(t *testing.T) {
			assert.Equal(t, all, allRequests(t, sb, url.Values{"limit": {limit}}))
		})
	}
	t.Run("a page ending inside a batch", func(t *testing.T) {
		p := listRequests(t, sb, url.Values{"limit": {"3"}})
		assert.Equal(t, all[:3], p.ids)
		assert.Regexp(t, `^[0-9]+\.[0-9]+$`, p.next, "the cursor names the place in the batch")
		resp := sb.Admin(t, http.MethodGet, pathRequests+"?limit=2&cursor="+p.next, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		rows := resp.JSON["requests"].([]any)
		require.Len(t, rows, 2)
		for j, r := range rows {
			m := r.(map[string]any)
			assert.Equal(t, all[3+j], m["requestId"])
			assert.Equal(t, rows[0].(map[string]any)["sequence"], m["sequence"], "the same batch message")
			assert.EqualValues(t, 2-j, m["index"], "its later events first")
		}
	})
	t.Run("a plain sequence cursor", func(t *testing.T) {
		// Below the first batch: only the two events published before it.
		p := listRequests(t, sb, url.Values{"cursor": {strconv.FormatUint(batchSeq, 10)}})
		assert.Equal(t, all[17:], p.ids)
		assert.Empty(t, p.next)
	})
}

// BenchmarkRequestLog measures one GET /api/usage/requests over a stream
// of 30,000 events: the newest page, a filter no event matches (the scan
// bound), and a page of one key's requests.
func BenchmarkRequestLog(b *testing.B) {
	sb := nodetest.Serve(b, b.TempDir())
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(b, err)
	machine := sb.Node.DefaultMachineID()
	const n = 30_000
	var futures []jetstream.PubAckFuture
	for i := range n {
		data, err := proto.Marshal(&busv1.UsageEvent{
			RequestId: fmt.Sprintf("req-%d", i), EventId: fmt.Sprintf("ev-%d", i), MachineId: machine, KeyId: fmt.Sprintf("k%d", i%20),
			Model: "m", Provider: "openai", Status: 200, TotalTokens: 100, Time: timestamppb.Now(),
		})
		require.NoError(b, err)
		f, err := js.PublishAsync(spine.SubjectUsage+"."+machine, data, jetstream.WithStallWait(time.Minute))
		require.NoError(b, err)
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	for _, bc := range []struct{ name, query string }{
		{"newest 50", "limit=50"},
		{"one key of 20", "keyId=k7&limit=50"},
		{"no match, scan bound", "model=none&limit=50"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				resp := sb.Admin(b, http.MethodGet, pathRequests+"?"+bc.query, nil)
				if resp.Status != http.StatusOK {
					b.Fatalf("%d %s", resp.Status, resp.Body)
				}
			}
		})
	}
}

// TestConsoleAdminRoutes covers the small admin routes the console reads:
// usage over time by key, the cooldowns running now, and the registry.
func TestConsoleAdminRoutes(t *testing.T) {
	up := upstreamtest.New(t)
	sb := nodetest.Serve(t, t.TempDir())
	connID := sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "local",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	issue := func(name string) (id, key string) {
		r := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": name})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		return r.JSON["id"].(string), r.JSON["key"].(string)
	}
	aID, aKey := issue("alpha")
	bID, bKey := issue("beta")
	chat := func(key string) int {
		return sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{
			"model": "local/gpt-4o-mini", "messages": []map[string]any{{"role": "user", "content": "hi"}}},
			"Authorization", "Bearer "+key).Status
	}
	require.Equal(t, http.StatusOK, chat(aKey))
	require.Equal(t, http.StatusOK, chat(aKey))
	require.Equal(t, http.StatusOK, chat(bKey))
	up.Enqueue(pathChat, upstreamtest.RateLimited("90"))
	require.Equal(t, http.StatusTooManyRequests, chat(bKey))

	t.Run("cooldowns", func(t *testing.T) {
		r := sb.Admin(t, http.MethodGet, "/api/cooldowns", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		cds := r.JSON["cooldowns"].([]any)
		require.Len(t, cds, 1)
		cd := cds[0].(map[string]any)
		assert.Equal(t, connID, cd["connectionId"])
		assert.Equal(t, "local", cd["connectionName"])
		assert.EqualValues(t, 429, cd["status"])
		assert.NotEmpty(t, cd["reason"])
		assert.InDelta(t, 90, cd["secondsLeft"], 5, "Retry-After: 90")

		other := sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "b"}).JSON["machine"].(map[string]any)["id"].(string)
		r = sb.Admin(t, http.MethodGet, "/api/cooldowns", nil, "X-Switchboard-Machine", other)
		assert.Empty(t, r.JSON["cooldowns"], "another machine sees none")

		require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/providers/"+connID+"/cooldowns", nil).Status)
		r = sb.Admin(t, http.MethodGet, "/api/cooldowns", nil)
		assert.Empty(t, r.JSON["cooldowns"])
	})

	t.Run("series by key", func(t *testing.T) {
		require.Eventually(t, func() bool {
			s := sb.Admin(t, http.MethodGet, "/api/usage/stats?period=24h", nil)
			tot, _ := s.JSON["totals"].(map[string]any)
			return tot != nil && tot["requests"] == float64(4)
		}, 30*time.Second, 50*time.Millisecond)
		r := sb.Admin(t, http.MethodGet, "/api/usage/series?period=24h&by=key", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Len(t, r.JSON["buckets"], 24, "hourly over 24 hours")
		sum := func(v any) (total float64) {
			for _, x := range v.([]any) {
				total += x.(float64)
			}
			return total
		}
		got := map[string][3]float64{}
		for _, s := range r.JSON["series"].([]any) {
			m := s.(map[string]any)
			assert.Len(t, m["requests"], 24)
			got[m["name"].(string)] = [3]float64{sum(m["requests"]), sum(m["errors"]), sum(m["totalTokens"])}
			assert.Contains(t, []string{aID, bID}, m["key"])
		}
		assert.Equal(t, 2.0, got["alpha"][0])
		assert.Equal(t, 0.0, got["alpha"][1])
		assert.Positive(t, got["alpha"][2])
		assert.Equal(t, 2.0, got["beta"][0])
		assert.Equal(t, 1.0, got["beta"][1], "the 429")

		r = sb.Admin(t, http.MethodGet, "/api/usage/series?period=7d&by=model", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Len(t, r.JSON["buckets"], 7, "daily over 7 days")
		for _, q := range []string{"period=1y", "by=color"} {
			assert.Equal(t, http.StatusBadRequest, sb.Admin(t, http.MethodGet, "/api/usage/series?"+q, nil).Status, q)
		}
	})

	t.Run("registry", func(t *testing.T) {
		r := sb.Admin(t, http.MethodGet, "/api/registry/providers", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		auth := map[string]string{}
		for _, p := range r.JSON["providers"].([]any) {
			m := p.(map[string]any)
			auth[m["id"].(string)] = m["auth"].(string)
		}
		assert.Equal(t, "apikey", auth["openai"])
		assert.Equal(t, "apikey", auth["openai-compatible"])
		assert.Equal(t, "device", auth["qwen"])
		assert.Equal(t, "authorization", auth["codex"])
		assert.Equal(t, http.StatusUnauthorized, sb.Do(t, http.MethodGet, "/api/registry/providers", nil).Status)
	})
}

// A gateway that has not served a request yet answers an empty request
// log, as its usage totals do, rather than 503 unavailable (its usage
// stream holds no message, so it has no first sequence to read from).
func TestRequestLogOfAFreshGateway(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	p := listRequests(t, sb, url.Values{})
	assert.Empty(t, p.ids)
	assert.Empty(t, p.next)
	p = listRequests(t, sb, url.Values{"model": {"local/llama3"}, "since": {time.Now().Add(-time.Hour).Format(time.RFC3339)}})
	assert.Empty(t, p.ids)
}
