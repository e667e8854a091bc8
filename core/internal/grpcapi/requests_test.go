package grpcapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequestLogCursor(t *testing.T) {
	tests := []struct {
		cursor string
		want   place
		err    bool
	}{
		{"42", place{42, 0}, false}, // a cursor of the time before batches
		{"42.3", place{42, 3}, false},
		{"", place{}, true},
		{"0", place{}, true},
		{"42.0", place{}, true}, // index 0 is written "42"
		{"42.", place{}, true},
		{"42.-1", place{}, true},
		{"42.+1", place{}, true},
		{".3", place{}, true},
		{"abc", place{}, true},
		{"42.3.1", place{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.cursor, func(t *testing.T) {
			got, err := parseCursor(tt.cursor)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.cursor, got.String(), "a cursor reads back as written")
		})
	}
	// Older places come after in the log: a plain cursor excludes its
	// whole message.
	assert.True(t, place{41, 9}.before(place{42, 0}))
	assert.True(t, place{42, 2}.before(place{42, 3}))
	assert.False(t, place{42, 1}.before(place{42, 0}))
	assert.False(t, place{42, 3}.before(place{42, 3}))
}

func FuzzParseCursor(f *testing.F) {
	for _, c := range []string{"42", "42.3", "", "1.", "18446744073709551615.2147483647"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		p, err := parseCursor(c)
		if err != nil {
			return
		}
		// What is accepted is a place that writes back the same.
		assert.Equal(t, c, p.String())
	})
}
