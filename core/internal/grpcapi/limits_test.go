package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

func TestValueTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"larger than a message", fmt.Errorf("upsert m: %w", nats.ErrMaxPayload), true},
		{"larger than the stream takes", fmt.Errorf("create k: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}), true},
		{"no responders", fmt.Errorf("put k: %w", nats.ErrNoResponders), false},
		{"timeout", context.DeadlineExceeded, false},
		{"other", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, valueTooLarge(tc.err))
		})
	}
}
