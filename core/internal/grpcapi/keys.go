package grpcapi

import (
	"context"

	"github.com/switchboardhq/switchboard/core/internal/apikey"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// findKey returns the stored record of raw, whose structure parsed came from
// apikey.Parse. A key that earlier releases stored under its plain SHA-256
// is moved to its keyed lookup id on this use, so that a copy of the key
// store no longer lets anyone test guesses of it; the move is retried on
// the next use when it fails.
func (a *Authenticator) findKey(ctx context.Context, raw string, parsed apikey.Key) (*busv1.APIKey, bool) {
	if k, ok := a.findStoredKey(ctx, raw, parsed); ok {
		return k, true
	}
	// A key created through another core replica a moment ago may not be
	// in this one's mirror yet: catch up, then look again.
	if err := a.store.Keys.CatchUp(ctx); err != nil {
		return nil, false
	}
	return a.findStoredKey(ctx, raw, parsed)
}

func (a *Authenticator) findStoredKey(ctx context.Context, raw string, parsed apikey.Key) (*busv1.APIKey, bool) {
	id := a.lookup.ID(raw)
	if e, ok := a.store.Keys.Get(id); ok {
		return e.Value, true
	}
	if parsed.Version == apikey.Version2 {
		return nil, false
	}
	old := apikey.Hash(raw)
	e, ok := a.store.Keys.Get(old)
	if !ok {
		return nil, false
	}
	// Create, then delete: the key is never missing from the store.
	ctx = context.WithoutCancel(ctx)
	if err := a.store.Keys.Create(ctx, id, e.Value); err != nil {
		// Another use moved it already (or the move is retried next time).
		return e.Value, true
	}
	// A revocation that raced with the move removed the old entry: undo the
	// move. One that comes later finds both entries (DeleteAPIKey).
	if cur, ok := a.store.Keys.Get(old); !ok || cur.Revision != e.Revision {
		_ = a.store.Keys.Delete(ctx, id)
		return nil, false
	}
	_ = a.store.Keys.Delete(ctx, old)
	return e.Value, true
}
