// Package storetest opens a core store on an embedded JetStream for the
// tests of the packages that read it.
package storetest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/core/internal/store"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/spine/spinetest"
)

// Open returns a store over a fresh embedded JetStream with the bus's
// topology, and a context that ends with the test.
func Open(t testing.TB) (context.Context, *store.Store) {
	t.Helper()
	js := spinetest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, spine.Topology{}.Ensure(ctx, js))
	st, err := store.Open(ctx, js, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return ctx, st
}
