package main

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboardhq/switchboard/internal/spine"
)

// countUsage opens the stopped gateway's JetStream store (in this process,
// without a listener) and counts the usage events it published, and those
// gone to the dead-letter stream.
func countUsage(ctx context.Context, dataDir string) (published, dead int, err error) {
	srv, err := spine.StartEmbedded(spine.EmbeddedConfig{DataDir: dataDir})
	if err != nil {
		return 0, 0, err
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("bench-usage-count", nil)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	count := func(name string) (int, error) {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		// Every message ever stored: the last sequence (the stream is
		// far below its limits in a run).
		return int(s.CachedInfo().State.LastSeq), nil
	}
	if published, err = count(spine.StreamUsage); err != nil {
		return 0, 0, err
	}
	if dead, err = count(spine.StreamUsageDead); err != nil {
		return 0, 0, err
	}
	return published, dead, nil
}
