package telemetry

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each key's series is made once and found again, from many goroutines.
func TestSeriesCache(t *testing.T) {
	var c SeriesCache[[2]string, *int]
	made := map[[2]string]int{}
	var mu sync.Mutex
	add := func(k [2]string) func() *int {
		return func() *int {
			mu.Lock()
			defer mu.Unlock()
			made[k]++
			return new(int)
		}
	}
	keys := [][2]string{{"openai", "ok"}, {"openai", "rate_limited"}, {"anthropic", "ok"}}
	first := map[[2]string]*int{}
	for _, k := range keys {
		first[k] = c.Get(k, add(k))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				for _, k := range keys {
					if got := c.Get(k, add(k)); got != first[k] {
						t.Errorf("%v: another series", k)
					}
				}
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		assert.Equal(t, 1, made[k], "%v made once", k)
	}
}
