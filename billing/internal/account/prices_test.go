package account

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/billing/internal/payments/paymentstest"
	billingv1 "github.com/switchboardhq/switchboard/proto/switchboard/billing/v1"
)

// TestPriceListWaitEndsWithTheCallersContext: while one caller loads the
// price list from a slow Stripe, a caller whose context is canceled or past
// its deadline gets its context's error at once instead of waiting for the
// load; the load goes on and its list is kept for the next callers.
func TestPriceListWaitEndsWithTheCallersContext(t *testing.T) {
	stripe := paymentstest.New()
	s := New(stripe, nil, Config{}, slog.New(slog.DiscardHandler))
	gate := stripe.Hold(paymentstest.OpListPrices)
	t.Cleanup(gate.Release)
	type answer struct {
		prices []*billingv1.Price
		err    error
	}
	loading := make(chan answer, 1)
	go func() {
		p, err := s.Prices(context.Background())
		loading <- answer{p, err}
	}()
	<-gate.Entered() // the load holds the lock, Stripe has not answered

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"past its deadline", expired, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			waiting := make(chan error, 1)
			go func() {
				_, err := s.Prices(tt.ctx)
				waiting <- err
			}()
			select {
			case err := <-waiting:
				require.ErrorIs(t, err, tt.want)
			case <-time.After(10 * time.Second):
				t.Fatal("the caller still waits behind the load it gave up on")
			}
		})
	}

	gate.Release()
	first := <-loading
	require.NoError(t, first.err)
	require.Len(t, first.prices, 2, "pro and team")
	loads := len(stripe.Calls())
	again, err := s.Prices(context.Background())
	require.NoError(t, err)
	require.Equal(t, first.prices, again)
	require.Equal(t, loads, len(stripe.Calls()), "the list loaded is kept")
}
