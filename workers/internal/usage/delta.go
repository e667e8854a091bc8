package usage

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// dayLayout formats a roll-up's UTC day (core's rollup.DayLayout).
const dayLayout = "2006-01-02"

// Event is a usage event with its place in the stream.
type Event struct {
	// Seq is the SB_USAGE stream sequence of the event's message, Index its
	// place in that message when the message is a batch (0 otherwise).
	// Core de-duplicates by Seq: every event of one message that goes to
	// one roll-up document travels in the same delta.
	Seq   uint64
	Index int
	// Time is when the request started (the event's time, else when it was
	// published).
	Time  time.Time
	Usage *busv1.UsageEvent
	// data is the event's encoding, for the dead-letter stream.
	data []byte
}

// eventKey identifies an event in the stream.
type eventKey struct {
	seq   uint64
	index int
}

// Group is the delta of some events and the events it sums, kept so that a
// delta core reports as split can be sent again one event at a time.
type Group struct {
	Delta  *corev1.UsageDelta
	Events []Event
}

type docKey struct{ machine, day string }

type rowKey struct {
	hour                                       int32
	provider, model, connection, key, endpoint string
}

// Build rolls events up into one delta per machine and UTC day, each with
// one row per hour, provider, model, connection, key and endpoint. Groups
// are ordered by machine and day, rows by hour and dimensions; a delta's
// sequences are its events' messages', each once. An event whose sequence
// and index repeat one already seen is left out.
func Build(events []Event) []Group {
	docs := map[docKey]*Group{}
	rows := map[docKey]map[rowKey]*busv1.UsageRow{}
	seen := make(map[eventKey]bool, len(events))
	for _, e := range events {
		if seen[eventKey{e.Seq, e.Index}] {
			continue
		}
		seen[eventKey{e.Seq, e.Index}] = true
		t := e.Time.UTC()
		dk := docKey{e.Usage.GetMachineId(), t.Format(dayLayout)}
		g := docs[dk]
		if g == nil {
			g = &Group{Delta: &corev1.UsageDelta{MachineId: dk.machine, Day: dk.day}}
			docs[dk] = g
			rows[dk] = map[rowKey]*busv1.UsageRow{}
		}
		g.Events = append(g.Events, e)
		g.Delta.Sequences = append(g.Delta.Sequences, e.Seq)
		r := RowOf(e.Usage, int32(t.Hour()))
		rk := rowKey{r.Hour, r.Provider, r.Model, r.ConnectionId, r.KeyId, r.Endpoint}
		if have := rows[dk][rk]; have != nil {
			addCounters(have.Counters, r.Counters)
			continue
		}
		rows[dk][rk] = r
		g.Delta.Rows = append(g.Delta.Rows, r)
	}
	out := make([]Group, 0, len(docs))
	for _, g := range docs {
		slices.Sort(g.Delta.Sequences)
		g.Delta.Sequences = slices.Compact(g.Delta.Sequences)
		slices.SortFunc(g.Delta.Rows, compareRows)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Delta.MachineId, b.Delta.MachineId), cmp.Compare(a.Delta.Day, b.Delta.Day))
	})
	return out
}

// Split returns one group per message of g's events: a message's events
// of one document are applied together or not at all, so core can tell
// each group applied or duplicate.
func Split(g Group) []Group {
	bySeq := map[uint64][]Event{}
	var seqs []uint64
	for _, e := range g.Events {
		if _, ok := bySeq[e.Seq]; !ok {
			seqs = append(seqs, e.Seq)
		}
		bySeq[e.Seq] = append(bySeq[e.Seq], e)
	}
	out := make([]Group, len(seqs))
	for i, s := range seqs {
		out[i] = Build(bySeq[s])[0]
	}
	return out
}

// RowOf is the row one event adds to the hour of its day; dimensions longer
// than maxDimension are clipped. A request
// answered with a status of 400 or more is an error; failed requests carry
// no tokens (core records them so), so failed attempts bill nobody.
func RowOf(ev *busv1.UsageEvent, hour int32) *busv1.UsageRow {
	c := &busv1.UsageCounters{
		Requests:         1,
		PromptTokens:     ev.GetPromptTokens(),
		CompletionTokens: ev.GetCompletionTokens(),
		TotalTokens:      ev.GetTotalTokens(),
		CachedTokens:     ev.GetCachedTokens(),
		CacheWriteTokens: ev.GetCacheWriteTokens(),
		ReasoningTokens:  ev.GetReasoningTokens(),
		LatencyMs:        ev.GetLatencyMs(),
	}
	if ev.GetStatus() >= 400 {
		c.Errors = 1
	}
	return &busv1.UsageRow{
		Hour:         hour,
		Provider:     clip(ev.GetProvider()),
		Model:        clip(ev.GetModel()),
		ConnectionId: clip(ev.GetConnectionId()),
		KeyId:        clip(ev.GetKeyId()),
		Endpoint:     clip(ev.GetEndpoint()),
		Counters:     c,
	}
}

// maxDimension bounds a row's dimension, in bytes, so that a batch's deltas
// stay small whatever model ids tenants send.
const maxDimension = 256

// clip bounds s to maxDimension bytes: a longer value keeps a prefix (cut
// on a character boundary) and a hash of the whole, so distinct values stay
// distinct.
func clip(s string) string {
	if len(s) <= maxDimension {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := "~" + hex.EncodeToString(sum[:8])
	cut := maxDimension - len(suffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "") + suffix
}

func addCounters(dst, src *busv1.UsageCounters) {
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
