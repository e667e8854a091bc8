package jobs

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// Metrics count the jobs the consumers handled, by consumer (a fixed set of
// durable names) and outcome: processed, retried or dead_lettered (given
// up after the last attempt, or undecodable).
type Metrics struct {
	jobs *prometheus.CounterVec
}

// NewMetrics registers the job metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Name: "jobs_total",
		Help: "Jobs handled by the workers, by consumer and outcome (processed, retried, dead_lettered).",
	}, []string{"consumer", "outcome"})}
	telemetry.Registerer(reg).MustRegister(m.jobs)
	return m
}

// Job outcomes.
const (
	outcomeProcessed    = "processed"
	outcomeRetried      = "retried"
	outcomeDeadLettered = "dead_lettered"
)

func (m *Metrics) count(consumer, outcome string) {
	if m != nil {
		m.jobs.WithLabelValues(consumer, outcome).Inc()
	}
}
