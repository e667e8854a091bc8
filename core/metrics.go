package core

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/core/internal/usage"
	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// registerCollectors adds the scrape-time views of core's state: the
// connections cooling now and the usage publisher's counters.
func registerCollectors(reg prometheus.Registerer, cooldowns *store.Cooldowns, use *usage.Publisher) {
	telemetry.Registerer(reg).MustRegister(cooldowns.Collector(time.Now), use.Collector())
}
