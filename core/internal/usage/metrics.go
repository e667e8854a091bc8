package usage

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/internal/telemetry"
)

var (
	publishedDesc = prometheus.NewDesc(telemetry.Namespace+"_usage_events_published_total",
		"Usage events stored on SB_USAGE.", nil, nil)
	bufferedDesc = prometheus.NewDesc(telemetry.Namespace+"_usage_events_buffered",
		"Usage events waiting in core for the bus (queued or in flight).", nil, nil)
	droppedDesc = prometheus.NewDesc(telemetry.Namespace+"_usage_events_dropped_total",
		"Usage events dropped because the buffer was full while the bus was away.", nil, nil)
	refusedDesc = prometheus.NewDesc(telemetry.Namespace+"_usage_events_refused_total",
		"Usage events the bus refused for good (too large, invalid).", nil, nil)
	retriedDesc = prometheus.NewDesc(telemetry.Namespace+"_usage_events_retried_total",
		"Usage event publications retried after a failure.", nil, nil)
)

// Collector exposes the publisher's counters (Stats) at scrape time.
func (p *Publisher) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Publisher }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{publishedDesc, bufferedDesc, droppedDesc, refusedDesc, retriedDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	ch <- prometheus.MustNewConstMetric(publishedDesc, prometheus.CounterValue, float64(s.Published))
	ch <- prometheus.MustNewConstMetric(bufferedDesc, prometheus.GaugeValue, float64(s.Buffered))
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(s.Dropped))
	ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(s.Refused))
	ch <- prometheus.MustNewConstMetric(retriedDesc, prometheus.CounterValue, float64(s.Retried))
}
