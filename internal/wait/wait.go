// Package wait pauses a loop (a retry's backoff) for as long as its context
// lets it.
package wait

import (
	"context"
	"time"
)

// Sleep waits d; it returns false at once when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
