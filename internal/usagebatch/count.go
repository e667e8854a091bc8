package usagebatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// CountEvents counts the events the messages of stream carry (SB_USAGE or
// SB_USAGE_DEAD), reading only their headers: a message without
// contract.HeaderUsageEvents is one event. A stream that does not exist
// holds none. It answers the messages read too.
func CountEvents(ctx context.Context, js jetstream.JetStream, stream string) (events, messages int, err error) {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	want := s.CachedInfo().State.Msgs
	if want == 0 {
		return 0, 0, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("count %s: %w", stream, err)
	}
	for uint64(messages) < want {
		batch, err := cons.Fetch(int(min(want-uint64(messages), 1000)), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return events, messages, fmt.Errorf("count %s: %w", stream, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			messages++
			events += Count(m.Headers())
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return events, messages, fmt.Errorf("count %s: %w", stream, err)
		}
		if got == 0 {
			break // fewer than the state said: the oldest went meanwhile
		}
	}
	return events, messages, nil
}
