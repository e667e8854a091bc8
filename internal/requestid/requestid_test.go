package requestid_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/switchboardhq/switchboard/internal/requestid"
)

func TestSanitize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "req-123", "req-123"},
		{"empty", "", ""},
		{"invalid utf-8", "a\xff\xfeb", "ab"},
		{"control characters", "a\r\nX-Evil: 1\x00b", "aX-Evil: 1b"},
		{"non-ascii", "café", "caf"},
		{"huge", strings.Repeat("x", 1<<20), strings.Repeat("x", requestid.MaxLen)},
		{"huge and dirty", strings.Repeat("\x01y", 1<<10), strings.Repeat("y", requestid.MaxLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, requestid.Sanitize(tt.in))
		})
	}
}

func TestFromMakesUpAnIDWhenNothingIsLeft(t *testing.T) {
	id := requestid.From("\x00\xff")
	assert.Len(t, id, 36)
	assert.Equal(t, "abc", requestid.From("abc"))
}

func FuzzSanitize(f *testing.F) {
	f.Add("req-1")
	f.Add("\xff\x00é")
	f.Fuzz(func(t *testing.T, s string) {
		got := requestid.Sanitize(s)
		if len(got) > requestid.MaxLen || !utf8.ValidString(got) {
			t.Fatalf("Sanitize(%q) = %q", s, got)
		}
		for i := range len(got) {
			if got[i] < 0x20 || got[i] > 0x7e {
				t.Fatalf("Sanitize(%q) kept byte %#x", s, got[i])
			}
		}
	})
}
