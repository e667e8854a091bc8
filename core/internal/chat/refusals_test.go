package chat

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A refusal is remembered for refusalMemory, ends when forgotten, and the
// memory stays bounded however many models clients name.
func TestReasoningRefusals(t *testing.T) {
	var r reasoningRefusals
	now := time.Now()
	key := refusalKey("conn", "model")
	assert.False(t, r.refuses(key, now))
	r.remember(key, now)
	assert.True(t, r.refuses(key, now.Add(refusalMemory-time.Second)))
	assert.False(t, r.refuses(refusalKey("conn", "other"), now), "another model of the connection")
	assert.False(t, r.refuses(refusalKey("other", "model"), now), "another connection")
	assert.False(t, r.refuses(key, now.Add(refusalMemory)), "asked with the reasoning again after")

	r.remember(key, now)
	r.forget(key)
	assert.False(t, r.refuses(key, now))

	for i := range 3 * maxRefusals {
		r.remember(refusalKey("conn", fmt.Sprint(i)), now)
	}
	assert.LessOrEqual(t, len(r.m), maxRefusals)
}
