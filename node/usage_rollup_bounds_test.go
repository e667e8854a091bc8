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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/spine"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
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
		_, err = js.PublishAsync(spine.SubjectUsage+"."+noisy, data, jetstream.WithMsgID(ev.EventId))
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
