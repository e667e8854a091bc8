package usage

import "github.com/nats-io/nats.go/jetstream"

// Tune sets the most events a message carries (1: no batches, as before
// batches).
func Tune(p *Publisher, maxEvents int) { p.maxBatch = maxEvents }

// SetJetStream replaces the JetStream the publisher sends through.
func SetJetStream(p *Publisher, js jetstream.JetStream) { p.js = js }
