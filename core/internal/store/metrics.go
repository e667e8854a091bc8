package store

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// coolingDesc is the gauge of connections cooling down now.
var coolingDesc = prometheus.NewDesc(telemetry.Namespace+"_connections_cooling",
	"(Connection, model) pairs cooling down now, by cause; read from the shared cooldown records at scrape time.",
	[]string{"reason"}, nil)

// CoolingCollector counts, at each scrape, the cooldown records whose end
// is still ahead. Every core replica sees the same records.
type CoolingCollector struct {
	c   *Cooldowns
	now func() time.Time
}

var _ prometheus.Collector = (*CoolingCollector)(nil)

// Collector returns the cooling gauge over the records.
func (c *Cooldowns) Collector(now func() time.Time) *CoolingCollector {
	return &CoolingCollector{c: c, now: now}
}

// Describe implements prometheus.Collector.
func (cc *CoolingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- coolingDesc }

// Collect implements prometheus.Collector.
func (cc *CoolingCollector) Collect(ch chan<- prometheus.Metric) {
	now := cc.now()
	counts := map[string]int{}
	cc.c.b.Range(func(_ string, e kvmirror.Entry[*busv1.Cooldown]) bool {
		if e.Value.GetUntil().AsTime().After(now) {
			counts[e.Value.GetReason()]++
		}
		return true
	})
	for reason, n := range counts {
		ch <- prometheus.MustNewConstMetric(coolingDesc, prometheus.GaugeValue, float64(n), reason)
	}
}
