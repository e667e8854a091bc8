// Package jobs publishes core's work to the SB_JOBS queue, de-duplicated by
// message id so a burst of requests enqueues one job.
package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/internal/spine"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// Publisher enqueues jobs.
type Publisher struct {
	js  jetstream.JetStream
	now func() time.Time
}

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher {
	return &Publisher{js: js, now: time.Now}
}

// CatalogRefresh asks for a connection's model list. Jobs with the same
// dedupKey within the de-duplication window are one job.
func (p *Publisher) CatalogRefresh(ctx context.Context, machineID, connectionID, dedupKey string) error {
	job := &busv1.CatalogRefreshJob{MachineId: machineID, ConnectionId: connectionID, RequestedAt: timestamppb.New(p.now())}
	return p.publish(ctx, spine.SubjectCatalogRefresh+"."+connectionID, "catalog_refresh."+connectionID+"."+dedupKey, job)
}

func (p *Publisher) publish(ctx context.Context, subject, msgID string, m proto.Message) error {
	_, err := p.enqueue(ctx, subject, msgID, m)
	return err
}

// enqueue publishes m, reporting whether the queue took it as a new job
// (false: a copy of one published within the de-duplication window).
func (p *Publisher) enqueue(ctx context.Context, subject, msgID string, m proto.Message) (bool, error) {
	data, err := proto.Marshal(m)
	if err != nil {
		return false, err
	}
	ack, err := p.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID))
	if err != nil {
		return false, fmt.Errorf("publish %s: %w", subject, err)
	}
	return !ack.Duplicate, nil
}

// TokenRefresh asks for a connection's OAuth tokens to be refreshed. Jobs for
// the same connection and token generation are one job, so a burst of 401s
// causes one refresh.
func (p *Publisher) TokenRefresh(ctx context.Context, machineID, connectionID string, generation uint64) error {
	_, err := p.QueueTokenRefresh(ctx, machineID, connectionID, generation)
	return err
}

// QueueTokenRefresh is TokenRefresh reporting whether a new job was queued:
// false when the queue dropped it as a copy of the generation's job
// published within the de-duplication window, which may have run already.
func (p *Publisher) QueueTokenRefresh(ctx context.Context, machineID, connectionID string, generation uint64) (queued bool, err error) {
	job := &busv1.TokenRefreshJob{MachineId: machineID, ConnectionId: connectionID, Generation: generation, RequestedAt: timestamppb.New(p.now())}
	return p.enqueue(ctx, spine.SubjectTokenRefresh+"."+connectionID, fmt.Sprintf("token_refresh.%s.%d", connectionID, generation), job)
}
