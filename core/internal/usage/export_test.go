package usage

// Tune sets the yields before each publishing round and the most events a
// message carries (1: no batches, as before batches).
func Tune(p *Publisher, yields, maxEvents int) { p.yields, p.maxBatch = yields, maxEvents }
