// Package rollup keeps the usage roll-ups: one document per machine and UTC
// day, counting requests per hour, provider, model, connection, API key and
// endpoint, to which every SB_USAGE event is added exactly once.
//
// Exactly once rests on the events' stream sequences. The roll-up consumer
// acknowledges an event only after core has stored it, so every sequence at
// or below the consumer's acknowledgement floor has been applied. A document
// keeps that floor and, above it, the set of sequences applied to it. An
// event whose sequence is at or below the floor, or in the set, is a
// duplicate (a redelivery after a worker died between storing and
// acknowledging, or a lost acknowledgement). Each application raises the
// floor to the consumer's latest and forgets the sequences below it, so the
// set holds only events whose acknowledgement is recent or still pending:
// about the consumer's MaxAckPending at most. MaxApplied bounds it should the
// floor stall.
//
// A document stays far below NATS's 1 MB payload limit whatever tenants
// send: its distinct rows take at most MaxRowBytes; past that a new row is
// folded into an "other" row of its hour, provider and endpoint (model,
// connection and key OtherKey), and once those reach MaxOtherBytes into the
// single "other" row of its hour. Counters are never lost, only the
// breakdown of the rows that came late in a crowded day. The applied
// sequences are bounded by MaxApplied (delta-encoded, a few bytes each).
package rollup

import (
	"cmp"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// DayLayout formats a roll-up's UTC day.
const DayLayout = "2006-01-02"

// MaxApplied bounds the applied sequences a document remembers above its
// floor. Past it the oldest are folded into the floor.
const MaxApplied = 50_000

// Bounds of a document's rows, in encoded bytes.
const (
	// MaxRowBytes bounds the distinct rows of a document.
	MaxRowBytes = 384 << 10
	// MaxOtherBytes bounds the distinct rows and the "other" rows that keep
	// provider and endpoint; past it only one "other" row per hour is added
	// (24 at most, a few dozen bytes each).
	MaxOtherBytes = 512 << 10
)

// OtherKey names the rows that fold together what did not fit.
const OtherKey = "(other)"

// Key is the key of a machine's roll-up of a day in sb_usage_rollups.
func Key(machineID, day string) string { return machineID + "." + day }

// Day returns the UTC day of t as a roll-up names it.
func Day(t time.Time) string { return t.UTC().Format(DayLayout) }

// Outcome says what Apply did with a delta.
type Outcome int

const (
	// Applied: the delta's events were new and are now counted.
	Applied Outcome = iota
	// Duplicate: every event of the delta was counted before; nothing changed.
	Duplicate
	// Mixed: some events were counted before and some were not; nothing
	// changed, and the events must be applied one by one.
	Mixed
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Mixed:
		return "mixed"
	}
	return "unknown"
}

// Apply adds the rows of a delta, the roll-up of the events with the given
// stream sequences, to doc unless those events were applied before. ackFloor
// is the consumer's acknowledgement floor. doc is modified only when the
// outcome is Applied.
func Apply(doc *busv1.UsageRollup, rows []*busv1.UsageRow, seqs []uint64, ackFloor uint64) Outcome {
	floor := max(doc.GetAppliedFloor(), ackFloor)
	applied := DecodeSequences(doc.GetAppliedSequences())
	seen := 0
	for _, s := range seqs {
		if s <= floor {
			seen++
			continue
		}
		if _, ok := slices.BinarySearch(applied, s); ok {
			seen++
		}
	}
	switch {
	case seen == len(seqs):
		return Duplicate
	case seen > 0:
		return Mixed
	}
	AddRows(doc, rows)
	applied = append(applied, seqs...)
	slices.Sort(applied)
	applied = slices.Compact(applied)
	// Forget what the floor now covers.
	i, _ := slices.BinarySearch(applied, floor+1)
	applied = applied[i:]
	if over := len(applied) - MaxApplied; over > 0 {
		floor = applied[over-1]
		applied = applied[over:]
	}
	doc.AppliedFloor = floor
	doc.AppliedSequences = EncodeSequences(applied)
	return Applied
}

// rowKey identifies a row of a document.
type rowKey struct {
	hour                                       int32
	provider, model, connection, key, endpoint string
}

func keyOf(r *busv1.UsageRow) rowKey {
	return rowKey{r.GetHour(), r.GetProvider(), r.GetModel(), r.GetConnectionId(), r.GetKeyId(), r.GetEndpoint()}
}

// AddRows adds rows to doc's rows of the same hour and dimensions, and keeps
// the rows ordered. A row with new dimensions that does not fit the
// document's bounds is folded into an "other" row (see the package doc).
func AddRows(doc *busv1.UsageRollup, rows []*busv1.UsageRow) {
	index := make(map[rowKey]*busv1.UsageRow, len(doc.Rows)+len(rows))
	size := 0
	for _, r := range doc.Rows {
		index[keyOf(r)] = r
		size += rowSize(r)
	}
	for _, r := range rows {
		k := keyOf(r)
		if have, ok := index[k]; ok {
			addInto(have, r)
			continue
		}
		if n := rowSize(r); size+n > MaxRowBytes {
			r = other(r, size+n > MaxOtherBytes)
			k = keyOf(r)
			if have, ok := index[k]; ok {
				addInto(have, r)
				continue
			}
		}
		r = proto.Clone(r).(*busv1.UsageRow)
		if r.Counters == nil {
			r.Counters = &busv1.UsageCounters{}
		}
		index[k] = r
		doc.Rows = append(doc.Rows, r)
		size += rowSize(r)
	}
	slices.SortFunc(doc.Rows, compareRows)
}

func addInto(have, r *busv1.UsageRow) {
	if have.Counters == nil {
		have.Counters = &busv1.UsageCounters{}
	}
	AddCounters(have.Counters, r.GetCounters())
}

// rowSize is a row's encoded size in its document (with tag and length).
func rowSize(r *busv1.UsageRow) int { return proto.Size(r) + 4 }

// other is the "other" row r folds into: its hour, provider and endpoint,
// or its hour alone when collapse is set.
func other(r *busv1.UsageRow, collapse bool) *busv1.UsageRow {
	o := &busv1.UsageRow{Hour: r.GetHour(), Provider: r.GetProvider(), Model: OtherKey, ConnectionId: OtherKey, KeyId: OtherKey, Endpoint: r.GetEndpoint(), Counters: r.GetCounters()}
	if collapse || len(o.Provider) > 64 || len(o.Endpoint) > 64 {
		o.Provider, o.Endpoint = OtherKey, OtherKey
	}
	return o
}

func compareRows(a, b *busv1.UsageRow) int {
	return cmp.Or(
		cmp.Compare(a.GetHour(), b.GetHour()),
		cmp.Compare(a.GetProvider(), b.GetProvider()),
		cmp.Compare(a.GetModel(), b.GetModel()),
		cmp.Compare(a.GetConnectionId(), b.GetConnectionId()),
		cmp.Compare(a.GetKeyId(), b.GetKeyId()),
		cmp.Compare(a.GetEndpoint(), b.GetEndpoint()),
	)
}

// AddCounters adds src to dst.
func AddCounters(dst, src *busv1.UsageCounters) {
	dst.Requests += src.GetRequests()
	dst.Errors += src.GetErrors()
	dst.PromptTokens += src.GetPromptTokens()
	dst.CompletionTokens += src.GetCompletionTokens()
	dst.TotalTokens += src.GetTotalTokens()
	dst.CachedTokens += src.GetCachedTokens()
	dst.CacheWriteTokens += src.GetCacheWriteTokens()
	dst.ReasoningTokens += src.GetReasoningTokens()
	dst.LatencyMs += src.GetLatencyMs()
}

// DecodeSequences expands a delta-encoded ascending list of sequences.
func DecodeSequences(enc []uint64) []uint64 {
	out := make([]uint64, len(enc))
	var prev uint64
	for i, d := range enc {
		prev += d
		out[i] = prev
	}
	return out
}

// EncodeSequences delta-encodes an ascending list of sequences: mostly
// one-byte varints on the wire.
func EncodeSequences(seqs []uint64) []uint64 {
	if len(seqs) == 0 {
		return nil
	}
	out := make([]uint64, len(seqs))
	var prev uint64
	for i, s := range seqs {
		out[i] = s - prev
		prev = s
	}
	return out
}
