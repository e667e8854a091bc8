package grpcapi

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/dispatch"
	"github.com/switchboardhq/switchboard/core/internal/routing"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// The series a request counts into are kept per label values; each request
// still lands in the series of its own labels, and a token kind the request
// did not report gets no series.
func TestRequestMetricsCountEachSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRequestMetrics(reg, func(t routing.Target) bool { return t.Model == "gpt-4o-mini" })
	known := dispatch.Result{Target: routing.Target{Model: "gpt-4o-mini"}}
	start := time.Now()
	chat := func(status int32) *busv1.UsageEvent {
		return &busv1.UsageEvent{Endpoint: "chat.completions", Provider: "openai", Model: "gpt-4o-mini", Status: status, PromptTokens: 3, CompletionTokens: 5}
	}
	m.observe(known, chat(200), start)
	m.observe(known, chat(200), start)
	m.observe(known, chat(429), start)
	m.observe(dispatch.Result{}, &busv1.UsageEvent{Endpoint: "embeddings", Provider: "openai", Model: "secret-finetune", Status: 200, PromptTokens: 7}, start)
	m.observe(dispatch.Result{}, &busv1.UsageEvent{Endpoint: "embeddings", Status: 404}, start)

	got := gather(t, reg)
	assert.Equal(t, map[string]float64{
		`switchboard_requests_total{endpoint="chat.completions",model="gpt-4o-mini",provider="openai",status="200"}`: 2,
		`switchboard_requests_total{endpoint="chat.completions",model="gpt-4o-mini",provider="openai",status="429"}`: 1,
		`switchboard_requests_total{endpoint="embeddings",model="other",provider="openai",status="200"}`:             1,
		`switchboard_requests_total{endpoint="embeddings",model="other",provider="none",status="404"}`:               1,
		`switchboard_request_duration_seconds{endpoint="chat.completions",provider="openai"}`:                        3,
		`switchboard_request_duration_seconds{endpoint="embeddings",provider="openai"}`:                              1,
		`switchboard_request_duration_seconds{endpoint="embeddings",provider="none"}`:                                1,
		`switchboard_tokens_total{kind="completion",model="gpt-4o-mini",provider="openai"}`:                          15,
		`switchboard_tokens_total{kind="prompt",model="gpt-4o-mini",provider="openai"}`:                              9,
		`switchboard_tokens_total{kind="prompt",model="other",provider="openai"}`:                                    7,
	}, got)
}

// gather reads every series: a counter's value, a histogram's count.
func gather(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"=\""+l.GetValue()+"\"")
			}
			name := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func BenchmarkRequestMetricsObserve(b *testing.B) {
	m := NewRequestMetrics(prometheus.NewRegistry(), func(routing.Target) bool { return true })
	ev := &busv1.UsageEvent{Endpoint: "chat.completions", Provider: "openai", Model: "gpt-4o-mini", Status: 200, PromptTokens: 3, CompletionTokens: 5}
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		m.observe(dispatch.Result{}, ev, start)
	}
}
