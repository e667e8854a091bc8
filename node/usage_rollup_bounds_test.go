package node_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/node/nodetest"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// One machine sends thousands of distinct long model ids (enough to make
// its day's document several megabytes unbounded) while a second machine
// has normal traffic: both roll up, no document passes the bound, the
// second machine's stats are right, and a poison event ends in the
// dead-letter stream, counted in the stats.
func TestUsageRollupsBoundedAndIsolated(t *testing.T) {
	p := newPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js, err := jetstream.New(p.sb.Node.NATS())
	require.NoError(t, err)

	const noisy, distinct = "00000000000000aa", 5000
	now := timestamppb.Now()
	for i := range distinct {
		ev := &busv1.UsageEvent{
			EventId: fmt.Sprintf("noisy-%d", i), MachineId: noisy, Provider: "openai",
			Model: fmt.Sprintf("openai/%s-%d", strings.Repeat("m", 400), i), Endpoint: "chat.completions",
			Status: 200, TotalTokens: 2, Time: now,
		}
		data, err := proto.Marshal(ev)
		require.NoError(t, err)
		_, err = js.PublishAsync(spine.SubjectUsage+"."+noisy, data, jetstream.WithMsgID(ev.EventId), jetstream.WithStallWait(time.Minute))
		require.NoError(t, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing the noisy events did not finish")
	}
	// A poison event of the quiet machine.
	quiet := p.sb.Node.DefaultMachineID()
	_, err = js.Publish(ctx, spine.SubjectUsage+"."+quiet, []byte("\xff\xffnot a usage event"))
	require.NoError(t, err)

	for range 4 {
		require.Equal(t, http.StatusOK, p.embed(t, "hello").Status)
	}

	var stats map[string]any
	require.Eventually(t, func() bool {
		stats = p.sb.Admin(t, http.MethodGet, pathUsageStats, nil).JSON
		tot, _ := stats["totals"].(map[string]any)
		pipe, _ := stats["pipeline"].(map[string]any)
		return tot != nil && tot["requests"] == float64(4) && pipe != nil && pipe["deadLettered"] == float64(1)
	}, 60*time.Second, 100*time.Millisecond, "quiet machine's stats: %v", stats)
	assert.Len(t, stats["byModel"], 1)

	kv, err := js.KeyValue(ctx, spine.BucketUsageRollups)
	require.NoError(t, err)
	key := noisy + "." + now.AsTime().UTC().Format("2006-01-02")
	var doc busv1.UsageRollup
	require.Eventually(t, func() bool {
		e, err := kv.Get(ctx, key)
		if err != nil || proto.Unmarshal(e.Value(), &doc) != nil {
			return false
		}
		var n int64
		for _, r := range doc.GetRows() {
			n += r.GetCounters().GetRequests()
		}
		return n == distinct
	}, 60*time.Second, 100*time.Millisecond)
	size := proto.Size(&doc)
	assert.Less(t, size, 1<<20-64<<10, "the noisy document stays well below NATS's payload limit")
	t.Logf("noisy document: %d rows, %d bytes", len(doc.GetRows()), size)
}

// A document whose write fails (here one written, by hand, right at NATS's
// payload limit) fails only its own delta: core stores the others of the
// same call and names the failed one.
func TestUsageApplyFailsOnlyTheRefusingDocument(t *testing.T) {
	sb := nodetest.Serve(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(sb.Node.NATS())
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, spine.BucketUsageRollups)
	require.NoError(t, err)

	const full = "00000000000000bb"
	day := time.Now().UTC()
	dayName := day.Format("2006-01-02")
	doc := &busv1.UsageRollup{MachineId: full, Day: dayName, Rows: []*busv1.UsageRow{{Hour: 0, Model: "m", Counters: &busv1.UsageCounters{Requests: 1}}}}
	limit := int(sb.Node.NATS().MaxPayload())
	doc.Rows[0].Model = strings.Repeat("m", limit-proto.Size(doc)-16)
	for proto.Size(doc) < limit-8 {
		doc.Rows[0].Model += "m"
	}
	data, err := proto.Marshal(doc)
	require.NoError(t, err)
	_, err = kv.Put(ctx, full+"."+dayName, data)
	require.NoError(t, err)

	conn, err := grpc.NewClient(sb.Node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	admin := corev1.NewAdminClient(conn)
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+nodetest.AdminToken)
	delta := func(machine string, seq uint64) *corev1.UsageDelta {
		return &corev1.UsageDelta{MachineId: machine, Day: dayName, Sequences: []uint64{seq},
			Rows: []*busv1.UsageRow{{Hour: int32(day.Hour()), Provider: "openai", Model: "gpt-4o-mini", Endpoint: "chat.completions",
				Counters: &busv1.UsageCounters{Requests: 1, TotalTokens: 5}}}}
	}
	var resp *corev1.ApplyUsageResponse
	require.Eventually(t, func() bool {
		// The mirror may not have seen the hand-written document yet.
		resp, err = admin.ApplyUsage(actx, &corev1.ApplyUsageRequest{Deltas: []*corev1.UsageDelta{delta(full, 1<<41), delta(sb.Node.DefaultMachineID(), 1<<41+1)}})
		return err == nil && len(resp.GetFailed()) == 1
	}, 20*time.Second, 50*time.Millisecond, "resp %v err %v", resp, err)
	assert.Equal(t, []int32{0}, resp.GetFailed())
	assert.EqualValues(t, 1, resp.GetApplied())

	stats := sb.Admin(t, http.MethodGet, pathUsageStats, nil)
	require.Equal(t, http.StatusOK, stats.Status)
	assert.Equal(t, float64(1), stats.JSON["totals"].(map[string]any)["requests"])
}
