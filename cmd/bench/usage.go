package main

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
)

// countUsage opens the stopped gateway's JetStream store (in this process,
// without a listener) and counts the usage events it published, and those
// gone to the dead-letter stream, and the messages that carried the
// published ones.
func countUsage(ctx context.Context, dataDir string) (published, messages, dead int, err error) {
	srv, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: dataDir})
	if err != nil {
		return 0, 0, 0, err
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("bench-usage-count", nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Events, not messages: a message of SB_USAGE is one event or a batch
	// of them, and so is, once in a while, a dead letter.
	if published, messages, err = usagebatch.CountEvents(ctx, js, spine.StreamUsage); err != nil {
		return 0, 0, 0, err
	}
	if dead, _, err = usagebatch.CountEvents(ctx, js, spine.StreamUsageDead); err != nil {
		return 0, 0, 0, err
	}
	return published, messages, dead, nil
}
