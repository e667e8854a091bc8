package usage

// Tune sets the most events a message carries (1: no batches, as before
// batches).
func Tune(p *Publisher, maxEvents int) { p.maxBatch = maxEvents }
