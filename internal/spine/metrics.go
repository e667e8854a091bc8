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
	natsStoreFailingDesc = prometheus.NewDesc(telemetry.Namespace+"_nats_store_failing",
		"1 while the embedded NATS server's store has failed a write (a full disk) and JetStream was not restarted since, else 0.", nil, nil)
	natsStoreRestartsDesc = prometheus.NewDesc(telemetry.Namespace+"_nats_store_restarts_total",
		"Times the embedded NATS server's JetStream was restarted after its store failed a write.", nil, nil)
)

// Collector exposes a NATS connection's state at scrape time, and the
// embedded server's store when emb is not nil.
func Collector(nc *nats.Conn, emb *Embedded) prometheus.Collector { return natsCollector{nc, emb} }

type natsCollector struct {
	nc  *nats.Conn
	emb *Embedded
}

func (c natsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- natsConnectedDesc
	ch <- natsReconnectsDesc
	if c.emb != nil {
		ch <- natsStoreFailingDesc
		ch <- natsStoreRestartsDesc
	}
}

func (c natsCollector) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if c.nc.IsConnected() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(natsConnectedDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(natsReconnectsDesc, prometheus.CounterValue, float64(c.nc.Stats().Reconnects))
	if c.emb != nil {
		failing := 0.0
		if c.emb.StoreFailing() {
			failing = 1
		}
		ch <- prometheus.MustNewConstMetric(natsStoreFailingDesc, prometheus.GaugeValue, failing)
		ch <- prometheus.MustNewConstMetric(natsStoreRestartsDesc, prometheus.CounterValue, float64(c.emb.StoreRestarts()))
	}
}
