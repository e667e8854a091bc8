package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/billing/internal/store"
)

// DeadLetters reads the events the consumer set aside and hands them to it
// again, for operators.
type DeadLetters struct {
	js jetstream.JetStream
	st *store.Store
}

// NewDeadLetters returns the dead letters of st, retried onto js's stream.
func NewDeadLetters(js jetstream.JetStream, st *store.Store) *DeadLetters {
	return &DeadLetters{js: js, st: st}
}

// List returns the dead letters, newest first.
func (d *DeadLetters) List(ctx context.Context) ([]store.DeadLetter, error) {
	return d.st.DeadEvents(ctx)
}

// Retry publishes the event kept under key to the stream again and forgets
// it; the consumer applies it like a new delivery (an event that fails
// again comes back). It is store.ErrNoDeadLetter when nothing is kept
// under key.
func (d *DeadLetters) Retry(ctx context.Context, key string) (string, error) {
	ev, rev, err := d.st.DeadEvent(ctx, key)
	if err != nil {
		return "", err
	}
	typ := ev.GetType()
	if typ == "" {
		typ = "unknown"
	}
	msg := nats.NewMsg(Subject(typ))
	msg.Data = ev.GetPayload()
	msg.Header.Set(HeaderEventType, typ)
	// The event id is in the stream's duplicate window already; the retry
	// has its own id, the same for the same dead letter, so a double
	// retry publishes once.
	msgID := "retry-" + key + "-" + strconv.FormatUint(rev, 10)
	if _, err := d.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(Stream)); err != nil {
		return "", fmt.Errorf("retry event %s: %w", ev.GetEventId(), err)
	}
	// Published: a concurrent retry, or the event failing again meanwhile,
	// changed the entry, which then stays.
	if err := d.st.DeleteDead(ctx, key, rev); err != nil && !errors.Is(err, store.ErrNoDeadLetter) {
		return "", fmt.Errorf("forget dead letter %s: %w", key, err)
	}
	return ev.GetEventId(), nil
}
