package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream is the stream of verified Stripe events.
const (
	Stream        = "SB_STRIPE"
	SubjectPrefix = "sb.stripe"
	// DedupWindow is how long the stream drops a re-delivered event id;
	// Stripe retries a delivery for up to three days. Beyond it the
	// processed-events bucket still applies each event once.
	DedupWindow = 72 * time.Hour
	// Retention is how long events stay on the stream, for replay.
	Retention = 30 * 24 * time.Hour
)

// HeaderEventType carries the event type on a stream message.
const HeaderEventType = "Stripe-Event-Type"

// StreamConfig is the SB_STRIPE stream definition.
func StreamConfig(replicas int) jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	return jetstream.StreamConfig{
		Name:        Stream,
		Description: "verified Stripe webhook events, de-duplicated by event id",
		Subjects:    []string{SubjectPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      Retention,
		Duplicates:  DedupWindow,
		Replicas:    replicas,
	}
}

// Subject is the subject of an event type ("sb.stripe.invoice.paid").
func Subject(eventType string) string { return SubjectPrefix + "." + eventType }

// Intake verifies deliveries and stores their events on the stream.
type Intake struct {
	js        jetstream.JetStream
	secret    string
	tolerance time.Duration
}

// NewIntake returns an Intake checking signatures with secret.
func NewIntake(js jetstream.JetStream, secret string, tolerance time.Duration) *Intake {
	return &Intake{js: js, secret: secret, tolerance: tolerance}
}

// Ingest verifies a delivery and returns once the stream acknowledged its
// event. duplicate is true when the stream already held it.
func (in *Intake) Ingest(ctx context.Context, payload []byte, signature string) (ev Event, duplicate bool, err error) {
	ev, err = Verify(payload, signature, in.secret, in.tolerance)
	if err != nil {
		return Event{}, false, err
	}
	msg := nats.NewMsg(Subject(ev.Type))
	msg.Data = payload
	msg.Header.Set(HeaderEventType, ev.Type)
	ack, err := in.js.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.ID), jetstream.WithExpectStream(Stream))
	if err != nil {
		return Event{}, false, fmt.Errorf("store event %s: %w", ev.ID, err)
	}
	return ev, ack.Duplicate, nil
}
