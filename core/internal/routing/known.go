package routing

// Known reports whether a target's model is one the gateway knows rather
// than whatever a client typed: a model of the provider's static list, a
// connection's enabled models or its fetched catalog. Metrics label only
// known models, so clients cannot grow their label sets.
func (r *Resolver) Known(t Target) bool {
	if t.Model == "" {
		return false
	}
	for _, c := range t.Connections {
		if r.lists(c, t.Spec, t.Model) {
			return true
		}
	}
	return false
}
