package spine

import (
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/internal/telemetry"
)

var (
	natsConnectedDesc = prometheus.NewDesc(telemetry.Namespace+"_nats_connected",
		"1 while the process's NATS connection is connected, else 0.", nil, nil)
	natsReconnectsDesc = prometheus.NewDesc(telemetry.Namespace+"_nats_reconnects_total",
		"Times the process's NATS connection reconnected.", nil, nil)
)

// Collector exposes a NATS connection's state at scrape time.
func Collector(nc *nats.Conn) prometheus.Collector { return natsCollector{nc} }

type natsCollector struct{ nc *nats.Conn }

func (c natsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- natsConnectedDesc
	ch <- natsReconnectsDesc
}

func (c natsCollector) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if c.nc.IsConnected() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(natsConnectedDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(natsReconnectsDesc, prometheus.CounterValue, float64(c.nc.Stats().Reconnects))
}
