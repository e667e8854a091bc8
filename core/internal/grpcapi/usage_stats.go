package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/apikey"
	"github.com/switchboardhq/switchboard/core/internal/rollup"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// UsageHealth reports the usage pipeline's counters in the usage stats.
type UsageHealth interface {
	Pipeline(ctx context.Context, machineID string) *corev1.UsagePipeline
}

// WithUsageHealth makes the usage stats report the pipeline's health, and
// returns a.
func (a *Admin) WithUsageHealth(h UsageHealth) *Admin {
	a.usageHealth = h
	return a
}

// maxUsageDeltas bounds the deltas of one ApplyUsage call.
const maxUsageDeltas = 10_000

// errUnchanged ends a Modify that has nothing to write.
var errUnchanged = errors.New("unchanged")

// ApplyUsage adds the usage worker's deltas to the roll-ups, each event once
// (see package rollup). A delta is stored with compare-and-swap on its
// document; when a call fails half-way the worker sends it again and the
// deltas already stored come back as duplicates.
func (a *Admin) ApplyUsage(ctx context.Context, req *corev1.ApplyUsageRequest) (*corev1.ApplyUsageResponse, error) {
	if _, err := a.auth.AdminWithoutCatchUp(ctx); err != nil {
		return nil, err
	}
	if len(req.GetDeltas()) > maxUsageDeltas {
		return nil, invalidParam("deltas", "too_many_deltas", fmt.Sprintf("at most %d deltas per call", maxUsageDeltas))
	}
	for i, d := range req.GetDeltas() {
		if err := validDelta(d); err != nil {
			return nil, invalidParam(fmt.Sprintf("deltas[%d]", i), "invalid_delta", err.Error())
		}
	}
	resp := &corev1.ApplyUsageResponse{}
	for i, d := range req.GetDeltas() {
		out, err := a.applyDelta(ctx, d, req.GetAckFloor())
		if err != nil {
			if !documentRefused(err) || ctx.Err() != nil {
				// The store itself is away: the whole call is retried.
				return nil, a.storeError(err)
			}
			// This document refused the write: the other deltas go on.
			a.log.Error("usage delta not stored", "machine", d.GetMachineId(), "day", d.GetDay(), "messages", len(d.GetSequences()), "err", err)
			resp.Failed = append(resp.Failed, int32(i))
			continue
		}
		switch out {
		case rollup.Applied:
			resp.Applied++
		case rollup.Duplicate:
			resp.Duplicates++
		case rollup.Mixed:
			resp.Split = append(resp.Split, int32(i))
		}
	}
	return resp, nil
}

// documentRefused reports whether err is a refusal of one document's write
// (too large, a bad request, endless conflicts) rather than the store being
// unreachable or busy, which fails the whole call to be retried.
func documentRefused(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, kvmirror.ErrConflict) || errors.Is(err, nats.ErrMaxPayload) ||
		errors.As(err, &api) && (api.Code == 400 || api.Code == 413)
}

func validDelta(d *corev1.UsageDelta) error {
	if !apikey.ValidMachineID(d.GetMachineId()) {
		return errors.New("machineId must be 16 lowercase hex characters")
	}
	if _, err := time.Parse(rollup.DayLayout, d.GetDay()); err != nil {
		return errors.New("day must be a date, YYYY-MM-DD")
	}
	if len(d.GetSequences()) == 0 {
		return errors.New("sequences must not be empty")
	}
	for _, r := range d.GetRows() {
		if r.GetHour() < 0 || r.GetHour() > 23 {
			return errors.New("row hours must be 0 to 23")
		}
	}
	return nil
}

// applyDelta stores one delta in its document, creating the document when
// it is the day's first.
func (a *Admin) applyDelta(ctx context.Context, d *corev1.UsageDelta, ackFloor uint64) (rollup.Outcome, error) {
	key := rollup.Key(d.GetMachineId(), d.GetDay())
	bucket := a.store.Rollups
	for range 8 {
		now := timestamppb.New(a.now())
		if _, ok := bucket.Get(key); !ok {
			doc := &busv1.UsageRollup{MachineId: d.GetMachineId(), Day: d.GetDay(), UpdatedAt: now}
			out := rollup.Apply(doc, d.GetRows(), d.GetSequences(), ackFloor)
			if out != rollup.Applied {
				return out, nil
			}
			err := bucket.Create(ctx, key, doc)
			if !errors.Is(err, kvmirror.ErrExists) {
				return out, err
			}
			// Another writer created it first: apply on top of theirs.
			if err := awaitKey(ctx, bucket, key); err != nil {
				return out, err
			}
			continue
		}
		var out rollup.Outcome
		_, err := bucket.Modify(ctx, key, func(doc *busv1.UsageRollup) error {
			out = rollup.Apply(doc, d.GetRows(), d.GetSequences(), ackFloor)
			if out != rollup.Applied {
				return errUnchanged
			}
			doc.UpdatedAt = now
			return nil
		})
		switch {
		case errors.Is(err, errUnchanged):
			return out, nil
		case errors.Is(err, kvmirror.ErrNotFound):
			continue
		}
		return out, err
	}
	return 0, kvmirror.ErrConflict
}

// awaitKey blocks until the mirror of b holds key.
func awaitKey(ctx context.Context, b *kvmirror.Bucket[*busv1.UsageRollup], key string) error {
	for {
		ch := b.Changed()
		if _, ok := b.Get(key); ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// GetUsageStats answers a machine's usage over a period from the in-memory
// mirror of the roll-ups.
func (a *Admin) GetUsageStats(ctx context.Context, req *corev1.GetUsageStatsRequest) (*corev1.GetUsageStatsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	p, err := rollup.NewPeriod(req.GetPeriod(), a.now())
	if err != nil {
		return nil, invalidParam("period", "invalid_period", "period must be one of "+strings.Join(rollup.Periods, ", "))
	}
	var docs []*busv1.UsageRollup
	for _, day := range p.Days() {
		if e, ok := a.store.Rollups.Get(rollup.Key(machineID, day)); ok {
			docs = append(docs, e.Value)
		}
	}
	st := rollup.Summarize(docs, p)

	connNames := map[string]string{}
	for _, c := range a.store.MachineConnections(machineID) {
		connNames[c.GetId()] = c.GetName()
	}
	keyNames := map[string]string{}
	a.store.Keys.Range(func(_ string, e kvmirror.Entry[*busv1.APIKey]) bool {
		if e.Value.GetMachineId() == machineID {
			keyNames[e.Value.GetId()] = e.Value.GetName()
		}
		return true
	})
	var pipeline *corev1.UsagePipeline
	if a.usageHealth != nil {
		pipeline = a.usageHealth.Pipeline(ctx, machineID)
	}
	return &corev1.GetUsageStatsResponse{
		Pipeline:     pipeline,
		Period:       p.Name,
		From:         timestamppb.New(p.From),
		To:           timestamppb.New(p.To),
		Totals:       usageTotals(st.Totals),
		ByProvider:   usageBreakdowns(st.ByProvider, nil),
		ByModel:      usageBreakdowns(st.ByModel, nil),
		ByConnection: usageBreakdowns(st.ByConnection, connNames),
		ByKey:        usageBreakdowns(st.ByKey, keyNames),
		ByEndpoint:   usageBreakdowns(st.ByEndpoint, nil),
	}, nil
}

func avgLatency(c *busv1.UsageCounters) float64 {
	if c.GetRequests() == 0 {
		return 0
	}
	return float64(c.GetLatencyMs()) / float64(c.GetRequests())
}

func usageTotals(c *busv1.UsageCounters) *corev1.UsageTotals {
	return &corev1.UsageTotals{
		Requests:         float64(c.GetRequests()),
		Errors:           float64(c.GetErrors()),
		PromptTokens:     float64(c.GetPromptTokens()),
		CompletionTokens: float64(c.GetCompletionTokens()),
		TotalTokens:      float64(c.GetTotalTokens()),
		CachedTokens:     float64(c.GetCachedTokens()),
		CacheWriteTokens: float64(c.GetCacheWriteTokens()),
		ReasoningTokens:  float64(c.GetReasoningTokens()),
		AvgLatencyMs:     avgLatency(c),
	}
}

func usageBreakdowns(rows []rollup.Breakdown, names map[string]string) []*corev1.UsageBreakdown {
	out := make([]*corev1.UsageBreakdown, len(rows))
	for i, r := range rows {
		c := r.Counters
		out[i] = &corev1.UsageBreakdown{
			Key:              r.Key,
			Name:             names[r.Key],
			Requests:         float64(c.GetRequests()),
			Errors:           float64(c.GetErrors()),
			PromptTokens:     float64(c.GetPromptTokens()),
			CompletionTokens: float64(c.GetCompletionTokens()),
			TotalTokens:      float64(c.GetTotalTokens()),
			CachedTokens:     float64(c.GetCachedTokens()),
			CacheWriteTokens: float64(c.GetCacheWriteTokens()),
			ReasoningTokens:  float64(c.GetReasoningTokens()),
			AvgLatencyMs:     avgLatency(c),
		}
	}
	return out
}
