package wait_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/wait"
)

func TestSleep(t *testing.T) {
	if !wait.Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep returned false with a live context")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if wait.Sleep(ctx, time.Hour) {
		t.Fatal("Sleep returned true with an ended context")
	}
}
