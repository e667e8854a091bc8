package usage

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/internal/spine"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// healthTimeout bounds the look-up of the dead-letter stream.
const healthTimeout = 2 * time.Second

// Health reports the usage pipeline: this replica's publisher counters and
// a machine's events in the dead-letter stream.
type Health struct {
	pub *Publisher
	js  jetstream.JetStream
}

// NewHealth returns a Health.
func NewHealth(pub *Publisher, js jetstream.JetStream) *Health {
	return &Health{pub: pub, js: js}
}

// Pipeline answers the counters; a dead-letter stream that cannot be read
// now counts as empty (the stats must not fail because of it).
func (h *Health) Pipeline(ctx context.Context, machineID string) *corev1.UsagePipeline {
	st := h.pub.Stats()
	out := &corev1.UsagePipeline{
		Buffered: float64(st.Buffered),
		Dropped:  float64(st.Dropped),
		Refused:  float64(st.Refused),
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	s, err := h.js.Stream(ctx, spine.StreamUsageDead)
	if err != nil {
		return out
	}
	subject := spine.SubjectUsageDead + "." + machineID
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return out
	}
	// The roll-up dead-letters events one message each; only a batch
	// message whose framing or compression is broken goes there whole (and
	// counts one).
	out.DeadLettered = float64(info.State.Subjects[subject])
	return out
}
