package rollup

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

func row(hour int32, provider, model, conn, key, endpoint string, requests, errors, prompt, latency int64) *busv1.UsageRow {
	return &busv1.UsageRow{Hour: hour, Provider: provider, Model: model, ConnectionId: conn, KeyId: key, Endpoint: endpoint,
		Counters: &busv1.UsageCounters{Requests: requests, Errors: errors, PromptTokens: prompt, TotalTokens: prompt, LatencyMs: latency}}
}

func TestApplyAddsRowsOnce(t *testing.T) {
	doc := &busv1.UsageRollup{MachineId: "0123456789abcdef", Day: "2026-03-04"}
	a := []*busv1.UsageRow{row(9, "openai", "m", "c1", "k1", "embeddings", 2, 0, 10, 30)}
	require.Equal(t, Applied, Apply(doc, a, []uint64{5, 7}, 0))

	b := []*busv1.UsageRow{
		row(9, "openai", "m", "c1", "k1", "embeddings", 1, 1, 0, 5), // same row: summed
		row(10, "openai", "m", "c2", "", "embeddings", 1, 0, 4, 8),  // new row
	}
	require.Equal(t, Applied, Apply(doc, b, []uint64{8, 12}, 0))
	want := []*busv1.UsageRow{
		row(9, "openai", "m", "c1", "k1", "embeddings", 3, 1, 10, 35),
		row(10, "openai", "m", "c2", "", "embeddings", 1, 0, 4, 8),
	}
	assert.Empty(t, cmp.Diff(want, doc.GetRows(), protocmp.Transform()))
	assert.Equal(t, []uint64{5, 7, 8, 12}, DecodeSequences(doc.GetAppliedSequences()))

	t.Run("a redelivered delta is a duplicate and changes nothing", func(t *testing.T) {
		before := proto.Clone(doc)
		assert.Equal(t, Duplicate, Apply(doc, b, []uint64{8, 12}, 0))
		assert.Equal(t, Duplicate, Apply(doc, a, []uint64{7, 5}, 0))
		assert.True(t, proto.Equal(before, doc))
	})
	t.Run("a delta mixing applied and new events changes nothing", func(t *testing.T) {
		before := proto.Clone(doc)
		assert.Equal(t, Mixed, Apply(doc, b, []uint64{12, 13}, 0))
		assert.True(t, proto.Equal(before, doc))
	})
	t.Run("the acknowledgement floor covers old events and prunes the set", func(t *testing.T) {
		c := []*busv1.UsageRow{row(11, "openai", "m", "c1", "k1", "embeddings", 1, 0, 1, 1)}
		require.Equal(t, Applied, Apply(doc, c, []uint64{20}, 8))
		assert.EqualValues(t, 8, doc.GetAppliedFloor())
		assert.Equal(t, []uint64{12, 20}, DecodeSequences(doc.GetAppliedSequences()), "5, 7 and 8 are under the floor")
		for _, seq := range []uint64{5, 7, 8, 12, 20} {
			assert.Equal(t, Duplicate, Apply(doc, c, []uint64{seq}, 0), "sequence %d", seq)
		}
		// A sequence under the consumer's floor was acknowledged, so applied
		// (to this document or, for another machine, to none).
		assert.Equal(t, Duplicate, Apply(doc, c, []uint64{15}, 16))
		// The floor never goes down.
		require.Equal(t, Applied, Apply(doc, c, []uint64{21}, 3))
		assert.EqualValues(t, 8, doc.GetAppliedFloor())
	})
}

func TestApplyBoundsTheAppliedSet(t *testing.T) {
	doc := &busv1.UsageRollup{}
	seqs := make([]uint64, MaxApplied+10)
	for i := range seqs {
		seqs[i] = uint64(100 + 2*i)
	}
	require.Equal(t, Applied, Apply(doc, []*busv1.UsageRow{row(0, "p", "m", "c", "", "e", int64(len(seqs)), 0, 0, 0)}, seqs, 0))
	applied := DecodeSequences(doc.GetAppliedSequences())
	assert.Len(t, applied, MaxApplied)
	assert.Equal(t, seqs[9], doc.GetAppliedFloor(), "the oldest ten folded into the floor")
	assert.Equal(t, seqs[10], applied[0])
	assert.Less(t, proto.Size(doc), 3*MaxApplied, "delta encoding keeps the set small")
}

func TestSequenceEncoding(t *testing.T) {
	for _, seqs := range [][]uint64{nil, {1}, {3, 4, 5, 900, 1 << 40}} {
		enc := EncodeSequences(seqs)
		assert.Len(t, enc, len(seqs))
		got := DecodeSequences(enc)
		if len(seqs) == 0 {
			assert.Empty(t, got)
			continue
		}
		assert.Equal(t, seqs, got)
	}
}

// Thousands of distinct long model ids (and keys, connections, providers)
// cannot push a document past the bound: late rows fold into "other" rows
// and every request is still counted.
func TestDocumentStaysBounded(t *testing.T) {
	doc := &busv1.UsageRollup{MachineId: "0123456789abcdef", Day: "2026-01-02"}
	var seq uint64
	const n = 20_000
	for i := range n / 100 {
		rows := make([]*busv1.UsageRow, 0, 100)
		seqs := make([]uint64, 0, 100)
		for j := range 100 {
			k := i*100 + j
			rows = append(rows, &busv1.UsageRow{
				Hour: int32(k % 24), Provider: fmt.Sprintf("openai-%d", k%500), Model: fmt.Sprintf("openai/%0200d", k),
				ConnectionId: fmt.Sprintf("conn-%d", k), KeyId: fmt.Sprintf("key-%d", k), Endpoint: fmt.Sprintf("e-%d", k%300),
				Counters: &busv1.UsageCounters{Requests: 1, TotalTokens: 3},
			})
			seq++
			seqs = append(seqs, seq)
		}
		require.Equal(t, Applied, Apply(doc, rows, seqs, 0))
		require.Less(t, proto.Size(doc), 900<<10, "after %d events", seq)
	}
	var requests, tokens, other int64
	for _, r := range doc.GetRows() {
		requests += r.GetCounters().GetRequests()
		tokens += r.GetCounters().GetTotalTokens()
		if r.GetModel() == OtherKey {
			other += r.GetCounters().GetRequests()
		}
	}
	assert.EqualValues(t, n, requests)
	assert.EqualValues(t, 3*n, tokens)
	assert.Positive(t, other)
}
