package spine

import "time"

// SetKeepTimings sets Keep's backoff bounds and settled run for a test,
// returning what puts them back.
func SetKeepTimings(lo, hi, settled time.Duration) (restore func()) {
	oldMin, oldMax, oldSettled := keepMin, keepMax, keepSettled
	keepMin, keepMax, keepSettled = lo, hi, settled
	return func() { keepMin, keepMax, keepSettled = oldMin, oldMax, oldSettled }
}
