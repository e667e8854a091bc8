package gateway

import (
	"context"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/switchboardhq/switchboard/internal/telemetry"
)

// nameRoute tells the edge's metrics and traces which gateway route served
// the request: its path template, not the path.
func nameRoute(ctx context.Context) {
	if pattern, ok := runtime.HTTPPathPattern(ctx); ok {
		telemetry.SetRoute(ctx, pattern)
	}
}
